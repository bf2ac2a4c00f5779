# adapted from pytorch/pytorch torch/distributed/fsdp/fully_sharded_data_parallel.py
import functools
from typing import Any, Optional

import torch
import torch.nn as nn
from torch.distributed.utils import _p_assert

from ._common_utils import _FSDPState, TrainingState
from ._runtime_utils import (
    _post_forward,
    _post_forward_reshard,
    _pre_forward,
    _pre_forward_unshard,
    _root_pre_forward,
)

FLAT_PARAM = "_flat_param"


class FullyShardedDataParallel(nn.Module, _FSDPState):
    """A wrapper for sharding module parameters across data parallel workers.

    This is inspired by `Xu et al.`_ as well as the ZeRO Stage 3 from DeepSpeed_.
    FullyShardedDataParallel is commonly shortened to FSDP.
    """

    def __init__(
        self,
        module: nn.Module,
        process_group: Optional[Any] = None,
        forward_prefetch: bool = False,
        limit_all_gathers: bool = True,
        use_orig_params: bool = False,
    ):
        torch._C._log_api_usage_once("torch.distributed.fsdp")
        super().__init__()
        _FSDPState.__init__(self)
        self._fsdp_wrapped_module = module
        self.process_group = process_group
        self.forward_prefetch = forward_prefetch
        self.limit_all_gathers = limit_all_gathers
        self._use_orig_params = use_orig_params

    @property
    def module(self) -> nn.Module:
        """Return the wrapped module."""
        # FSDP's `.module` must refer to the innermost wrapped module when
        # composing with other module wrappers in order for state dict to work
        if isinstance(self._fsdp_wrapped_module, nn.Module):
            return self._fsdp_wrapped_module
        raise AttributeError("FSDP has no wrapped module")

    @property
    def _has_params(self) -> bool:
        """Returns whether this FSDP instance manages any parameters."""
        return hasattr(self, "_handles") and len(self._handles) > 0

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        """Run the forward pass for the wrapped module, inserting FSDP-specific pre- and post-forward sharding logic."""
        handles = self._handles
        with torch.autograd.profiler.record_function(
            "FullyShardedDataParallel.forward"
        ):
            args, kwargs = _root_pre_forward(self, self, args, kwargs)
            unused = None
            unshard_fn = functools.partial(
                _pre_forward_unshard, allow_prefetch=torch.is_grad_enabled()
            )
            args, kwargs = _pre_forward(
                self,
                handles,
                unshard_fn,
                self._fsdp_wrapped_module,
                args,
                kwargs,
            )
            for handle in handles:
                _p_assert(
                    handle.flat_param.device == self.compute_device,
                    "Expected `FlatParameter` to be on the compute device "
                    f"{self.compute_device} but got {handle.flat_param.device}",
                )
            output = self._fsdp_wrapped_module(*args, **kwargs)
            return _post_forward(
                self, handles, _post_forward_reshard, self, unused, output
            )
