from dataclasses import dataclass, field

import torch


@dataclass
class LogitsForwardConfig:
    temperature: float = 1.0
    calculate_entropy: bool = False
    use_fused_kernels: bool = False
    needs_grad: bool = field(default_factory=torch.is_grad_enabled)
