from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Dict, Optional

import torch


@dataclass
class ForwardContext:
    attn_metadata: Any
    virtual_engine: int = 0
    inference: bool = True
    no_compile_layers: Dict[str, Any] = field(default_factory=dict)


_forward_context: Optional[ForwardContext] = None


def get_forward_context() -> ForwardContext:
    assert _forward_context is not None, "Forward context is not set. Please use `set_forward_context` to set it."
    return _forward_context


@contextmanager
def set_forward_context(attn_metadata: Any, virtual_engine: int = 0):
    global _forward_context
    prev_context = _forward_context
    _forward_context = ForwardContext(
        attn_metadata=attn_metadata,
        virtual_engine=virtual_engine,
        inference=torch.is_inference_mode_enabled(),
    )
    try:
        yield
    finally:
        _forward_context = prev_context
