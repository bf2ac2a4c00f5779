from dataclasses import dataclass, field

import torch


@dataclass(frozen=True)
class RuntimeFlags:
    is_train: bool
    inference: bool = False
    extra: dict = field(default_factory=dict)


def current_flags(inference_context=None) -> RuntimeFlags:
    return RuntimeFlags(is_train=torch.is_grad_enabled(), inference=inference_context is not None)
