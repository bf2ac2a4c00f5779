# adapted from NVIDIA/apex apex/parallel/optimized_sync_batchnorm.py
import warnings

import torch
from torch.nn import functional as F
from torch.nn.modules.batchnorm import _BatchNorm

from .optimized_sync_batchnorm_kernel import SyncBatchnormFunction


class SyncBatchNorm(_BatchNorm):
    """
    synchronized batch normalization module extented from `torch.nn.BatchNormNd`
    with the added stats reduction across multiple processes.
    """

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True,
                 process_group=None, channel_last=False):
        super(SyncBatchNorm, self).__init__(num_features, eps=eps, momentum=momentum, affine=affine,
                                            track_running_stats=track_running_stats)
        self.process_group = process_group
        self.channel_last = channel_last

    def _specify_process_group(self, process_group):
        self.process_group = process_group

    def forward(self, input):
        # if input.dim() == 2, we switch to channel_last for efficient memory accessing
        channel_last = self.channel_last if input.dim() != 2 else True

        if torch.is_grad_enabled() and input.size(0) == 1:
            warnings.warn("SyncBatchNorm received a per-process batch of 1 in a differentiable pass")

        # batch statistics (and their cross-process reduction) only while a graph is recorded
        use_batch_stats = torch.is_grad_enabled() or not self.track_running_stats or channel_last
        if not use_batch_stats:
            # fall back to pytorch implementation for inference
            return F.batch_norm(input, self.running_mean, self.running_var, self.weight, self.bias,
                                False, 0.0, self.eps)
        else:
            exponential_average_factor = 0.0
            if self.training and self.track_running_stats:
                self.num_batches_tracked += 1
                if self.momentum is None:
                    exponential_average_factor = 1.0 / float(self.num_batches_tracked)
                else:
                    exponential_average_factor = self.momentum
            return SyncBatchnormFunction.apply(input, self.weight, self.bias, self.running_mean,
                                               self.running_var, self.eps,
                                               self.training or not self.track_running_stats,
                                               exponential_average_factor, self.process_group, channel_last)
