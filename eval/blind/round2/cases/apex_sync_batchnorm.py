# Modelled on NVIDIA apex apex/parallel/sync_batchnorm.py (python SyncBatchNorm, before commit 43246540)
import warnings

import torch
from torch.distributed import ReduceOp
from torch.nn import functional as F
from torch.nn.modules.batchnorm import _BatchNorm

from apex.parallel.sync_batchnorm_kernel import SyncBatchnormFunction


class SyncBatchNorm(_BatchNorm):
    warned = False

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True,
                 process_group=None, channel_last=False):
        if channel_last:
            raise AttributeError("channel_last is not supported by primitive SyncBatchNorm implementation.")
        if not SyncBatchNorm.warned:
            warnings.warn("apex was installed without --cuda_ext. Fused syncbn kernels will be unavailable.")
            SyncBatchNorm.warned = True
        super().__init__(num_features, eps=eps, momentum=momentum, affine=affine,
                         track_running_stats=track_running_stats)
        self.process_group = process_group

    def forward(self, input):
        torch.cuda.nvtx.range_push("sync_bn_fw_with_mean_var")
        mean = None
        var = None
        cast = None
        if self.running_mean is not None and self.running_mean.dtype != input.dtype:
            input = input.to(self.running_mean.dtype)
            cast = input.dtype

        grad_mode = torch.is_grad_enabled()
        if self.training and not grad_mode:
            warnings.warn("SyncBatchNorm forward in train() mode under no_grad()", stacklevel=2)

        if not grad_mode and self.track_running_stats:
            # fall back to pytorch implementation for inference
            torch.cuda.nvtx.range_pop()
            out = F.batch_norm(input, self.running_mean, self.running_var, self.weight, self.bias, False, 0.0,
                               self.eps)
        else:
            process_group = self.process_group
            world_size = 1
            if not self.process_group:
                process_group = torch.distributed.group.WORLD
            self.num_batches_tracked += 1
            with torch.no_grad():
                channel_first_input = input.transpose(0, 1).contiguous()
                squashed_input_tensor_view = channel_first_input.view(channel_first_input.size(0), -1)
                local_m = float(squashed_input_tensor_view.size()[1])
                local_mean = torch.mean(squashed_input_tensor_view, 1)
                local_sqr_mean = torch.pow(squashed_input_tensor_view, 2).mean(1)
                if torch.distributed.is_initialized():
                    world_size = torch.distributed.get_world_size(process_group)
                    torch.distributed.all_reduce(local_mean, ReduceOp.SUM, process_group)
                    mean = local_mean / world_size
                    torch.distributed.all_reduce(local_sqr_mean, ReduceOp.SUM, process_group)
                    sqr_mean = local_sqr_mean / world_size
                    m = local_m * world_size
                else:
                    m = local_m
                    mean = local_mean
                    sqr_mean = local_sqr_mean
                var = sqr_mean - mean.pow(2)
                if self.running_mean is not None:
                    self.running_mean = self.momentum * mean + (1 - self.momentum) * self.running_mean
                if self.running_var is not None:
                    self.running_var = m / (m - 1) * self.momentum * var + (1 - self.momentum) * self.running_var
            torch.cuda.nvtx.range_pop()
            out = SyncBatchnormFunction.apply(input, self.weight, self.bias, mean, var, self.eps, process_group,
                                              world_size)
        return out.to(cast) if cast is not None else out
