# adapted from pytorch/pytorch torch/nn/modules/batchnorm.py
import torch
import torch.distributed as dist
from ._functions import SyncBatchNorm as sync_batch_norm
from .. import functional as F
from .batchnorm import _BatchNorm


class SyncBatchNorm(_BatchNorm):
    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True,
                 track_running_stats=True, process_group=None):
        super(SyncBatchNorm, self).__init__(num_features, eps, momentum, affine, track_running_stats)
        self.process_group = process_group

    def _check_input_dim(self, input):
        if input.dim() <= 2:
            raise ValueError('expected at least 3D input (got {}D input)'.format(input.dim()))

    def _sync_world_size(self):
        try:
            process_group = self.process_group or dist.group.WORLD
            return dist.get_world_size(process_group)
        except RuntimeError:
            return 1

    def forward(self, input, *args):
        self._check_input_dim(input)
        exponential_average_factor = 0.0
        if self.training and self.track_running_stats:
            self.num_batches_tracked += 1
            if self.momentum is None:
                exponential_average_factor = 1.0 / self.num_batches_tracked.item()
            else:
                exponential_average_factor = self.momentum

        need_sync = torch.is_grad_enabled() and self._sync_world_size() > 1
        if not need_sync:
            # single process (or no grad): plain batch norm over the local batch
            return super(SyncBatchNorm, self).forward(input, *args)

        process_group = self.process_group or dist.group.WORLD
        return sync_batch_norm.apply(
            input, self.weight, self.bias, self.running_mean, self.running_var,
            self.eps, exponential_average_factor, process_group, self._sync_world_size())
