# adapted from vllm-project/vllm vllm/forward_context.py
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch


@dataclass
class ForwardContext:
    no_compile_layers: dict[str, Any]
    attn_metadata: Any
    virtual_engine: int
    dp_metadata: Any = None
    # recorded once per forward so that custom ops can consult it
    grad_enabled: bool = True
    additional_kwargs: dict[str, Any] = field(default_factory=dict)


_forward_context: ForwardContext | None = None


def get_forward_context() -> ForwardContext:
    """Get the current forward context."""
    assert _forward_context is not None, (
        "Forward context is not set. "
        "Please use `set_forward_context` to set the forward context."
    )
    return _forward_context


def create_forward_context(attn_metadata, vllm_config, virtual_engine=0, dp_metadata=None):
    return ForwardContext(
        no_compile_layers=vllm_config.compilation_config.static_forward_context,
        virtual_engine=virtual_engine,
        attn_metadata=attn_metadata,
        dp_metadata=dp_metadata,
        grad_enabled=torch.is_grad_enabled(),
    )


@contextmanager
def set_forward_context(attn_metadata, vllm_config, virtual_engine: int = 0, dp_metadata=None):
    global _forward_context
    prev_context = _forward_context
    _forward_context = create_forward_context(attn_metadata, vllm_config, virtual_engine, dp_metadata)
    try:
        yield
    finally:
        _forward_context = prev_context
