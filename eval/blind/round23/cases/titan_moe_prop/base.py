# adapted from pytorch/torchtitan torchtitan/models/moe.py
import torch
from torch import nn


class GradModeAwareModule(nn.Module):
    """Mixin shared by the MoE submodules."""

    @property
    def _is_train_step(self) -> bool:
        return torch.is_grad_enabled()
