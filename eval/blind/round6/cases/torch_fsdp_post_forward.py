"""Pre/post-forward runtime hooks for a fully sharded data parallel wrapper."""
from typing import Any, List, Optional

import torch
import torch.nn as nn
from torch.utils._pytree import tree_flatten, tree_unflatten


class HandleShardingStrategy:
    FULL_SHARD = "full_shard"
    SHARD_GRAD_OP = "shard_grad_op"
    NO_SHARD = "no_shard"


RESHARD_AFTER_FORWARD_STRATEGIES = (HandleShardingStrategy.FULL_SHARD,)


def _register_pre_backward_hooks(state, module: nn.Module, outputs: Any, handle) -> Any:
    if not torch.is_grad_enabled():
        return outputs
    if state._is_root:
        state._post_backward_callback_queued = False
    if handle:
        handle._needs_pre_backward_unshard = False
        handle._ran_pre_backward_hook = False
    flat_outputs, spec = tree_flatten(outputs)
    for t in flat_outputs:
        if torch.is_tensor(t) and t.requires_grad:
            t.register_hook(lambda grad, h=handle: state._pre_backward_hook(h, grad))
    return tree_unflatten(flat_outputs, spec)


def _should_free_in_forward(state, handle) -> bool:
    strategy = getattr(handle, "_sharding_strategy", HandleShardingStrategy.FULL_SHARD)
    in_backward_pass = getattr(state, "training_state", None) == "BACKWARD_PRE"
    return strategy in RESHARD_AFTER_FORWARD_STRATEGIES and not in_backward_pass


def _post_forward_reshard(state, handle) -> None:
    if not handle:
        return
    free_unsharded_flat_param = _should_free_in_forward(state, handle)
    free_unsharded_flat_param = free_unsharded_flat_param and getattr(state, "_grad_mode_on", True)
    handle.reshard(free_unsharded_flat_param)
    handle.post_reshard()


def _pre_forward(state, handle, unshard_fn, module: nn.Module, args, kwargs):
    state._grad_mode_on = torch.is_grad_enabled()
    state.training_state = "FORWARD_BACKWARD"
    if handle:
        handle._training_state = "FORWARD"
    unshard_fn(state, handle)
    return args, kwargs


def _post_forward(state, handle, module: nn.Module, input: Any, output: Any) -> Any:
    _post_forward_reshard(state, handle)
    output = _register_pre_backward_hooks(state, module, output, handle)
    state.training_state = "IDLE"
    if handle:
        handle._training_state = "IDLE"
    return output
