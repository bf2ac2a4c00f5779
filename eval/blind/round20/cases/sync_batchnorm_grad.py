# adapted from pytorch/pytorch torch/nn/modules/batchnorm.py
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.modules.batchnorm import _BatchNorm
from torch.nn.modules._functions import SyncBatchNorm as sync_batch_norm


class SyncBatchNorm(_BatchNorm):
    r"""Applies Batch Normalization over a N-Dimensional input, with statistics
    synchronized across the ranks of ``process_group``.
    """

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True,
                 track_running_stats=True, process_group=None):
        super(SyncBatchNorm, self).__init__(num_features, eps, momentum, affine, track_running_stats)
        self.process_group = process_group

    def _check_input_dim(self, input):
        if input.dim() < 2:
            raise ValueError('expected at least 2D input (got {}D input)'.format(input.dim()))

    def forward(self, input):
        self._check_input_dim(input)

        if self.momentum is None:
            exponential_average_factor = 0.0
        else:
            exponential_average_factor = self.momentum

        if self.training and self.track_running_stats:
            self.num_batches_tracked = self.num_batches_tracked + 1
            if self.momentum is None:  # use cumulative moving average
                exponential_average_factor = 1.0 / self.num_batches_tracked.item()
            else:  # use exponential moving average
                exponential_average_factor = self.momentum

        # batch statistics while we are building a graph, running stats otherwise
        use_batch_stats = torch.is_grad_enabled() or not self.track_running_stats

        running_mean = self.running_mean if not use_batch_stats or self.track_running_stats else None
        running_var = self.running_var if not use_batch_stats or self.track_running_stats else None

        need_sync = use_batch_stats
        if need_sync:
            process_group = dist.group.WORLD
            if self.process_group:
                process_group = self.process_group
            world_size = dist.get_world_size(process_group)
            need_sync = world_size > 1

        if not need_sync:
            return F.batch_norm(
                input, running_mean, running_var, self.weight, self.bias,
                use_batch_stats, exponential_average_factor, self.eps)
        else:
            return sync_batch_norm.apply(
                input, self.weight, self.bias, running_mean, running_var,
                self.eps, exponential_average_factor, process_group, world_size)
