# adapted from NVIDIA/apex apex/parallel/optimized_sync_batchnorm.py (SyncBatchnormFunction body)
import torch
import torch.distributed as dist

import syncbn

from .plan import NormPlan


class SyncBatchnormFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input, weight, bias, running_mean, running_variance, eps, plan: NormPlan, process_group):
        input = input.contiguous()
        mean, var_biased = syncbn.welford_mean_var(input)
        count = torch.full_like(mean, input.numel() // input.size(1))
        if plan.sync_stats:
            world_size = dist.get_world_size(process_group)
            mean_all = torch.empty(world_size, mean.size(0), dtype=mean.dtype, device=mean.device)
            var_all = torch.empty_like(mean_all)
            count_all = torch.empty_like(mean_all)
            dist.all_gather_into_tensor(mean_all, mean, process_group)
            dist.all_gather_into_tensor(var_all, var_biased, process_group)
            dist.all_gather_into_tensor(count_all, count, process_group)
            mean, var, inv_std = syncbn.welford_parallel(mean_all, var_all, count_all, eps)
        else:
            inv_std = 1.0 / torch.sqrt(var_biased + eps)
            var = var_biased
        if plan.update_running:
            running_mean.data = running_mean.data * (1 - plan.momentum) + plan.momentum * mean
            running_variance.data = running_variance.data * (1 - plan.momentum) + plan.momentum * var
        ctx.save_for_backward(input, weight, mean, inv_std)
        ctx.process_group = process_group
        return syncbn.batchnorm_forward(input, mean, inv_std, weight, bias)
