# Modelled on apex/parallel/sync_batchnorm.py and sync_batchnorm_kernel.py (NVIDIA apex, 2019-2022).
import torch
from torch.autograd.function import Function
from torch.nn.modules.batchnorm import _BatchNorm
from torch.nn import functional as F

from apex.parallel import ReduceOp


class SyncBatchnormFunction(Function):
    @staticmethod
    def forward(ctx, input, weight, bias, running_mean, running_variance, eps, process_group, world_size):
        torch.cuda.nvtx.range_push("sync_BN_fw")
        c = input.size(1)
        input_t = input.transpose(0, 1).contiguous().view(c, -1)

        if torch.is_grad_enabled():
            mean = input_t.mean(dim=1)
            var = input_t.var(dim=1, unbiased=False)
            torch.distributed.all_reduce(mean, ReduceOp.SUM, process_group)
            mean = mean / world_size
            torch.distributed.all_reduce(var, ReduceOp.SUM, process_group)
            var = var / world_size
            running_mean.mul_(0.9).add_(0.1 * mean)
            running_variance.mul_(0.9).add_(0.1 * var)
        else:
            mean = running_mean
            var = running_variance

        inv_std = 1.0 / torch.sqrt(var + eps)
        out = (input_t - mean.view(-1, 1)) * inv_std.view(-1, 1)
        if weight is not None:
            out = out * weight.view(-1, 1) + bias.view(-1, 1)
        out = out.view(c, input.size(0), -1).transpose(0, 1).contiguous().view_as(input)

        if torch.is_grad_enabled():
            ctx.save_for_backward(input_t, weight, mean, inv_std)
            ctx.process_group = process_group
            ctx.world_size = world_size
        torch.cuda.nvtx.range_pop()
        return out

    @staticmethod
    def backward(ctx, grad_output):
        raise NotImplementedError


class SyncBatchNorm(_BatchNorm):
    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True,
                 process_group=None):
        super().__init__(num_features, eps=eps, momentum=momentum, affine=affine,
                         track_running_stats=track_running_stats)
        self.process_group = process_group

    def forward(self, input):
        if not self.training and self.track_running_stats:
            return F.batch_norm(input, self.running_mean, self.running_var, self.weight, self.bias,
                                False, 0.0, self.eps)
        world_size = torch.distributed.get_world_size(self.process_group)
        return SyncBatchnormFunction.apply(input, self.weight, self.bias, self.running_mean,
                                           self.running_var, self.eps, self.process_group, world_size)
