# Adapted from NVIDIA/apex apex/parallel/optimized_sync_batchnorm.py (SyncBatchNorm.forward)
# and apex/parallel/optimized_sync_batchnorm_kernel.py (SyncBatchnormFunction.forward).
import torch
import torch.distributed as dist
from torch.nn import functional as F
from torch.nn.modules.batchnorm import _BatchNorm

import syncbn


class SyncBatchnormFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input, weight, bias, running_mean, running_variance, eps,
                track_running_stats=True, momentum=1.0, process_group=None, channel_last=False):
        input = input.contiguous()
        world_size = 0
        mean = None
        var_biased = None
        inv_std = None
        var = None

        if track_running_stats:
            if channel_last:
                count = int(input.numel() / input.size(-1))
                mean, var_biased = syncbn.welford_mean_var_c_last(input)
            else:
                count = int(input.numel() / input.size(1))
                mean, var_biased = syncbn.welford_mean_var(input)

            if dist.is_initialized():
                if not process_group:
                    process_group = dist.group.WORLD
                world_size = dist.get_world_size(process_group)
                mean_all = torch.empty(world_size, mean.size(0), dtype=mean.dtype, device=mean.device)
                var_all = torch.empty(world_size, var_biased.size(0), dtype=var_biased.dtype, device=var_biased.device)
                dist.all_gather(list(mean_all.unbind(0)), mean, process_group)
                dist.all_gather(list(var_all.unbind(0)), var_biased, process_group)
                mean, var, inv_std = syncbn.welford_parallel(mean_all, var_all, count, eps)
            else:
                inv_std = 1.0 / torch.sqrt(var_biased + eps)
                var = var_biased * count / (count - 1)

            running_mean.data = running_mean.data * (1 - momentum) + momentum * mean
            running_variance.data = running_variance.data * (1 - momentum) + momentum * var
        else:
            mean = running_mean.data
            inv_std = 1.0 / torch.sqrt(running_variance.data + eps)

        ctx.save_for_backward(input, weight, mean, inv_std)
        ctx.process_group = process_group
        ctx.channel_last = channel_last
        ctx.world_size = world_size

        if channel_last:
            return syncbn.batchnorm_forward_c_last(input, mean, inv_std, weight, bias)
        return syncbn.batchnorm_forward(input, mean, inv_std, weight, bias)


class SyncBatchNorm(_BatchNorm):
    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True,
                 process_group=None, channel_last=False):
        super().__init__(num_features, eps=eps, momentum=momentum, affine=affine,
                         track_running_stats=track_running_stats)
        self.process_group = process_group
        self.channel_last = channel_last

    def forward(self, input):
        channel_last = self.channel_last if input.dim() != 2 else True
        if not self.training and self.track_running_stats and not channel_last:
            return F.batch_norm(input, self.running_mean, self.running_var, self.weight, self.bias,
                                False, 0.0, self.eps)
        exponential_average_factor = 0.0
        if self.training and self.track_running_stats:
            self.num_batches_tracked += 1
            exponential_average_factor = self.momentum if self.momentum is not None else 1.0 / float(self.num_batches_tracked)
        return SyncBatchnormFunction.apply(
            input, self.weight, self.bias, self.running_mean, self.running_var, self.eps,
            torch.is_grad_enabled() or not self.track_running_stats,
            exponential_average_factor, self.process_group, channel_last,
        )
