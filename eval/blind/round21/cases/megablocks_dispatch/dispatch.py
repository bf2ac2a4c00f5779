# adapted from databricks/megablocks megablocks/layers/moe.py
import torch

from megablocks.layers import mpu
from megablocks.layers.arguments import Arguments


class Dispatcher:
    """Per-forward token dispatch settings."""

    def __init__(self, args: Arguments, grad_enabled: bool):
        self.args = args
        self.world_size = mpu.get_expert_parallel_world_size(args)
        self.grad_enabled = grad_enabled


_DISPATCHERS = {}


def register_dispatcher(name):
    def _wrap(cls):
        _DISPATCHERS[name] = cls
        return cls
    return _wrap


@register_dispatcher("default")
class DefaultDispatcher(Dispatcher):
    pass


def select_dispatcher(args: Arguments) -> Dispatcher:
    cls = _DISPATCHERS[getattr(args, "moe_dispatcher", "default")]
    return cls(args, torch.is_grad_enabled())
