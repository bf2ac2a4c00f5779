"""Describe a dispatched collective op: its user-facing kind, process group, async flag, shapes.

Both the c10d ops that ``torch.distributed.all_reduce`` and friends dispatch
(``c10d.allreduce_``, ``c10d._allgather_base_``, ...) and the functional collectives
(``_c10d_functional.all_reduce``, ...) reach a ``TorchDispatchMode``; that is how the
witness sees them, on gloo and NCCL alike. Imports torch.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist

COLLECTIVE_NAMESPACES = ("c10d", "_c10d_functional", "c10d_functional")

#: c10d op name -> the torch.distributed call users write
KINDS = {
    "allreduce_": "all_reduce",
    "allreduce_coalesced_": "all_reduce_coalesced",
    "_allgather_base_": "all_gather_into_tensor",
    "allgather_": "all_gather",
    "allgather_coalesced_": "all_gather_coalesced",
    "allgather_into_tensor_coalesced_": "all_gather_into_tensor_coalesced",
    "_reduce_scatter_base_": "reduce_scatter_tensor",
    "reduce_scatter_": "reduce_scatter",
    "reduce_scatter_tensor_coalesced_": "reduce_scatter_tensor_coalesced",
    "broadcast_": "broadcast",
    "reduce_": "reduce",
    "gather_": "gather",
    "scatter_": "scatter",
    "alltoall_": "all_to_all",
    "alltoall_base_": "all_to_all_single",
    "barrier": "barrier",
    "send": "send",
    "recv_": "recv",
    "recv_any_source_": "recv_any_source",
    "monitored_barrier_": "monitored_barrier",
}

#: functional ops that are not collectives themselves
NOT_COLLECTIVES = {"wait_tensor", "_wrap_tensor_autograd"}


def is_collective(func: Any) -> bool:
    return func.namespace in COLLECTIVE_NAMESPACES and func._opname not in NOT_COLLECTIVES


def _bound(func: Any, args: tuple, kwargs: dict) -> dict[str, Any]:
    """The op's arguments by schema name, defaults filled in (the dispatcher drops trailing
    arguments equal to their default, e.g. ``async_op=True``)."""
    values: dict[str, Any] = {}
    for i, arg in enumerate(func._schema.arguments):
        if i < len(args):
            values[arg.name] = args[i]
        elif arg.name in kwargs:
            values[arg.name] = kwargs[arg.name]
        elif arg.has_default_value():
            values[arg.name] = arg.default_value
    return values


def _process_group(values: dict[str, Any]) -> Any:
    for value in values.values():
        if isinstance(value, torch.ScriptObject) and "ProcessGroup" in str(value._type()):
            return dist.ProcessGroup.unbox(value)
    name = values.get("group_name")
    if isinstance(name, str):
        from torch.distributed.distributed_c10d import _resolve_process_group  # type: ignore[attr-defined]

        return _resolve_process_group(name)  # type: ignore[arg-type]  # GroupName is a str
    return None


def _shapes(values: dict[str, Any]) -> tuple[tuple[int, ...], ...]:
    shapes: list[tuple[int, ...]] = []
    for value in values.values():
        items = value if isinstance(value, (list, tuple)) else [value]
        for item in items:
            if isinstance(item, (list, tuple)):
                shapes += [tuple(t.shape) for t in item if isinstance(t, torch.Tensor)]
            elif isinstance(item, torch.Tensor):
                shapes.append(tuple(item.shape))
    return tuple(shapes)


def describe(func: Any, args: tuple, kwargs: dict) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """(kind, detail compared, info shown) for a collective op."""
    values = _bound(func, args, kwargs)
    functional = func.namespace != "c10d"
    kind = func._opname if functional else KINDS.get(func._opname, func._opname)
    group = _process_group(values)
    ranks: tuple[int, ...] | None = None
    size = name = None
    if group is not None:
        size = group.size()
        name = group.group_name
        ranks = tuple(dist.get_process_group_ranks(group))
    if functional:
        is_async: bool | None = True  # functional collectives return before the data arrive
    else:
        flag = values.get("async_op")
        is_async = bool(flag) if isinstance(flag, bool) else None
    detail = {
        "group_ranks": ranks,
        "group_size": size,
        "group_name": name,
        "async": is_async,
        "shapes": _shapes(values),
    }
    return kind, detail, {"op": f"{func.namespace}.{func._opname}", "functional": functional}
