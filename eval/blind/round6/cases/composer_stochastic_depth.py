"""Block-wise stochastic depth for residual networks."""
import torch
import torch.nn as nn
from torchvision.ops import stochastic_depth


class StochasticBottleneck(nn.Module):
    def __init__(self, block: nn.Module, drop_rate: float, drop_distribution: str = "linear",
                 grad_scale: float = 1.0):
        super().__init__()
        self.block = block
        self.drop_rate = drop_rate
        self.drop_distribution = drop_distribution
        self.grad_scale = grad_scale

    def _scale_grad(self, grad: torch.Tensor) -> torch.Tensor:
        return grad * self.grad_scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x
        out = self.block(x)
        if torch.is_grad_enabled() and self.grad_scale != 1.0:
            out.register_hook(self._scale_grad)
        sample = torch.is_grad_enabled() and self.drop_rate > 0
        out = stochastic_depth(out, p=self.drop_rate, mode="row", training=sample)
        if self.block.downsample is not None:
            identity = self.block.downsample(x)
        return self.block.relu(out + identity)


def apply_stochastic_depth(model: nn.Module, target_layer_name: str, drop_rate: float = 0.2,
                           drop_distribution: str = "linear") -> nn.Module:
    blocks = [m for m in model.modules() if type(m).__name__ == target_layer_name]
    num_blocks = len(blocks)
    for idx, block in enumerate(blocks):
        rate = drop_rate * (idx + 1) / num_blocks if drop_distribution == "linear" else drop_rate
        parent_name, _, child_name = _find_name(model, block).rpartition(".")
        parent = model.get_submodule(parent_name) if parent_name else model
        setattr(parent, child_name, StochasticBottleneck(block, rate, drop_distribution))
    return model


def _find_name(model: nn.Module, target: nn.Module) -> str:
    for name, module in model.named_modules():
        if module is target:
            return name
    raise ValueError("module not found")
