# adapted from NVIDIA/apex apex/parallel/optimized_sync_batchnorm.py
import torch
from torch.nn.modules.batchnorm import _BatchNorm
from torch.nn import functional as F

from .kernel import SyncBatchnormFunction
from .plan import make_norm_plan


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
        plan = make_norm_plan(self)
        return SyncBatchnormFunction.apply(input, self.weight, self.bias, self.running_mean,
                                           self.running_var, self.eps, plan, self.process_group)
