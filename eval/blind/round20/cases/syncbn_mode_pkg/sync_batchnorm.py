# adapted from pytorch/pytorch torch/nn/modules/batchnorm.py
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.modules.batchnorm import _BatchNorm
from torch.nn.modules._functions import SyncBatchNorm as sync_batch_norm

from ._mode import resolve_mode


class SyncBatchNorm(_BatchNorm):
    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True,
                 track_running_stats=True, process_group=None):
        super(SyncBatchNorm, self).__init__(num_features, eps, momentum, affine, track_running_stats)
        self.process_group = process_group

    def forward(self, input):
        if input.dim() < 2:
            raise ValueError('expected at least 2D input (got {}D input)'.format(input.dim()))
        exponential_average_factor = 0.0 if self.momentum is None else self.momentum
        mode = resolve_mode(self)

        use_batch_stats = mode.grad_enabled or not mode.track_running_stats
        if use_batch_stats and self.track_running_stats:
            self.num_batches_tracked = self.num_batches_tracked + 1
            if self.momentum is None:
                exponential_average_factor = 1.0 / self.num_batches_tracked.item()

        running_mean = self.running_mean if not use_batch_stats or self.track_running_stats else None
        running_var = self.running_var if not use_batch_stats or self.track_running_stats else None

        world_size = dist.get_world_size(mode.process_group)
        need_sync = mode.grad_enabled and world_size > 1
        if not need_sync:
            return F.batch_norm(input, running_mean, running_var, self.weight, self.bias,
                                use_batch_stats, exponential_average_factor, self.eps)
        return sync_batch_norm.apply(input, self.weight, self.bias, running_mean, running_var,
                                     self.eps, exponential_average_factor, mode.process_group, world_size)
