# mypy: allow-untyped-defs
"""Explicit forward prefetching between FSDP states (cf. FSDPModule.set_modules_to_forward_prefetch)."""
from typing import List


def run_forward_prefetch(states_to_forward_prefetch: List, state_ctx) -> None:
    if not state_ctx.grad_enabled:
        return
    for fsdp_state in states_to_forward_prefetch:
        target_param_group = fsdp_state._fsdp_param_group
        if target_param_group is not None:
            target_param_group._prefetch_unshard(target_param_group, "forward")
