# Dataclass whose default_factory snapshots grad mode when the runtime object is built.
from dataclasses import dataclass, field
import torch


@dataclass
class LoraRuntime:
    grad: bool = field(default_factory=torch.is_grad_enabled)
    use_dora: bool = False
    adapter_names: tuple = ()


def current_runtime(**kw) -> LoraRuntime:
    return LoraRuntime(**kw)
