# adapted from SeekPoint/pytorch torch/nn/modules/batchnorm.py
import torch
from torch import Tensor

from .. import functional as F
from .module import Module


class _BatchNorm(Module):
    def forward(self, input: Tensor) -> Tensor:
        self._check_input_dim(input)
        if self.momentum is None:
            exponential_average_factor = 0.0
        else:
            exponential_average_factor = self.momentum

        if self.training and self.track_running_stats:
            if self.num_batches_tracked is not None:
                self.num_batches_tracked.add_(1)

        bn_training = torch.is_grad_enabled() or (self.running_mean is None and self.running_var is None)

        return F.batch_norm(
            input,
            self.running_mean if not bn_training or self.track_running_stats else None,
            self.running_var if not bn_training or self.track_running_stats else None,
            self.weight, self.bias, bn_training, exponential_average_factor, self.eps,
        )
