import functools
import threading
from contextlib import contextmanager
from typing import Any, Dict, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.utils.checkpoint as torch_checkpoint


class ThreadLocal(threading.local):
    def __init__(self) -> None:
        self.is_checkpointing = False
        self.is_recomputing = False


thread_local = ThreadLocal()


@contextmanager
def enable_checkpointing():
    orig = thread_local.is_checkpointing
    thread_local.is_checkpointing = True
    try:
        yield
    finally:
        thread_local.is_checkpointing = orig


def checkpoint_wrapper(module: nn.Module, offload_to_cpu: bool = False) -> nn.Module:
    module.forward = functools.partial(_checkpointed_forward, type(module).forward, module, offload_to_cpu)
    return module


def _checkpointed_forward(original_forward, weak_self, offload_to_cpu: bool, *args: Any, **kwargs: Any) -> Any:
    module = weak_self
    if not torch.is_grad_enabled() or thread_local.is_checkpointing:
        return original_forward(module, *args, **kwargs)
    with enable_checkpointing():
        return torch_checkpoint.checkpoint(original_forward, module, *args, use_reentrant=True, **kwargs)


class ParallelMLPBlock(nn.Module):
    def __init__(self, hidden: int, ffn: int, dropout: float = 0.1):
        super().__init__()
        self.fc1 = nn.Linear(hidden, ffn)
        self.fc2 = nn.Linear(ffn, hidden)
        self.dropout = dropout
        self.norm = nn.LayerNorm(hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = F.gelu(self.fc1(self.norm(x)))
        h = self.fc2(h)
        apply_dropout = self.training and torch.is_grad_enabled()
        if apply_dropout:
            h = F.dropout(h, p=self.dropout, training=True)
        return x + h


def build_checkpointed_stack(hidden: int, ffn: int, depth: int) -> nn.Sequential:
    blocks = [checkpoint_wrapper(ParallelMLPBlock(hidden, ffn)) for _ in range(depth)]
    return nn.Sequential(*blocks)
