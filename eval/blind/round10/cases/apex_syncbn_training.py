# Adapted from NVIDIA/apex apex/parallel/optimized_sync_batchnorm_kernel.py / sync_batchnorm.py
import torch
import torch.distributed as dist


class SyncBatchnormFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input, weight, bias, running_mean, running_variance, eps,
                process_group, world_size, momentum=0.1):
        input = input.contiguous()
        training = torch.is_grad_enabled()
        if training:
            mean = input.mean(dim=(0, 2, 3))
            var = input.var(dim=(0, 2, 3), unbiased=False)
            stats = torch.cat([mean, var])
            dist.all_reduce(stats, group=process_group)
            stats = stats / world_size
            mean, var = stats.chunk(2)
            with torch.no_grad():
                running_mean.mul_(1 - momentum).add_(momentum * mean)
                running_variance.mul_(1 - momentum).add_(momentum * var)
        else:
            mean, var = running_mean, running_variance
        inv_std = torch.rsqrt(var + eps)
        out = (input - mean[None, :, None, None]) * inv_std[None, :, None, None]
        out = out * weight[None, :, None, None] + bias[None, :, None, None]
        if input.requires_grad:
            ctx.save_for_backward(input, weight, mean, inv_std)
            ctx.process_group = process_group
        return out


class SyncBatchNorm(torch.nn.BatchNorm2d):
    def __init__(self, num_features, process_group=None):
        super().__init__(num_features)
        self.process_group = process_group

    def forward(self, x):
        if not self.training and self.track_running_stats:
            return torch.nn.functional.batch_norm(x, self.running_mean, self.running_var,
                                                  self.weight, self.bias, False, 0.0, self.eps)
        ws = dist.get_world_size(self.process_group)
        return SyncBatchnormFunction.apply(x, self.weight, self.bias, self.running_mean,
                                           self.running_var, self.eps, self.process_group, ws)
