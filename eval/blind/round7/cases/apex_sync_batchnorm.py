import torch
import torch.distributed as dist
from torch.nn.modules.batchnorm import _BatchNorm
from torch.nn import functional as F

import syncbn


class SyncBatchnormFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input, weight, bias, running_mean, running_variance, eps,
                process_group, world_size, momentum, needs_input_grad):
        input = input.contiguous()
        mean, var_biased = syncbn.welford_mean_var(input)
        if world_size > 1:
            mean_all = torch.empty(world_size, mean.size(0), dtype=mean.dtype, device=mean.device)
            var_all = torch.empty_like(mean_all)
            dist.all_gather(list(mean_all.unbind(0)), mean, process_group)
            dist.all_gather(list(var_all.unbind(0)), var_biased, process_group)
            count = torch.full((world_size,), input.numel() // input.size(1),
                               dtype=torch.int32, device=input.device)
            mean, var, inv_std = syncbn.welford_parallel(mean_all, var_all, count, eps)
        else:
            inv_std = 1.0 / torch.sqrt(var_biased + eps)
            var = var_biased * input.numel() / (input.numel() - input.size(1))
        if running_mean is not None:
            running_mean.data = running_mean.data * (1 - momentum) + momentum * mean
            running_variance.data = running_variance.data * (1 - momentum) + momentum * var
        if needs_input_grad and input.requires_grad:
            ctx.save_for_backward(input, weight, mean, inv_std)
            ctx.process_group = process_group
            ctx.world_size = world_size
        return syncbn.batchnorm_forward(input, mean, inv_std, weight, bias)

    @staticmethod
    def backward(ctx, grad_output):
        raise NotImplementedError


class SyncBatchNorm(_BatchNorm):
    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True,
                 track_running_stats=True, process_group=None):
        super().__init__(num_features, eps=eps, momentum=momentum, affine=affine,
                         track_running_stats=track_running_stats)
        self.process_group = process_group

    def forward(self, input):
        use_batch_stats = torch.is_grad_enabled() or not self.track_running_stats
        if not use_batch_stats:
            return F.batch_norm(input, self.running_mean, self.running_var, self.weight,
                                self.bias, False, 0.0, self.eps)
        self.num_batches_tracked += 1
        process_group = self.process_group or dist.group.WORLD
        world_size = dist.get_world_size(process_group)
        return SyncBatchnormFunction.apply(
            input, self.weight, self.bias, self.running_mean, self.running_var,
            self.eps, process_group, world_size, self.momentum,
            torch.is_grad_enabled(),
        )
