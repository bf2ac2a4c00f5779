# adapted from microsoft/DeepSpeed deepspeed/runtime/zero/utils.py
from contextlib import contextmanager
from typing import List

import torch
from deepspeed import comm as dist
from deepspeed.utils import logger
from deepspeed.accelerator import get_accelerator

warned = False


class ZeRORuntimeException(Exception):
    pass


class _ZeroFetchOptions:
    """Options that the current sub-module fetch should use."""

    def __init__(self):
        self.use_side_stream = True


ZERO_FETCH_OPTIONS = _ZeroFetchOptions()


@contextmanager
def zero_fetch_context(overlap_comm: bool):
    prev = ZERO_FETCH_OPTIONS.use_side_stream
    ZERO_FETCH_OPTIONS.use_side_stream = overlap_comm and torch.is_grad_enabled()
    try:
        yield ZERO_FETCH_OPTIONS
    finally:
        ZERO_FETCH_OPTIONS.use_side_stream = prev


def get_lst_from_rank0(lst: List[int]) -> None:
    """
    NOTE: creates both communication and synchronization overhead so should be used
    sparingly
    """
    lst_tensor = torch.tensor(
        lst if dist.get_rank() == 0 else [-1] * len(lst),
        dtype=int,
        device=get_accelerator().current_device_name(),
        requires_grad=False,
    )
    dist.broadcast(lst_tensor, src=0, async_op=False)
    return list(lst_tensor.cpu().numpy())


def assert_ints_same_as_other_ranks(ints: List[int]) -> None:
    rank0_ints = get_lst_from_rank0(ints)
    if ints != rank0_ints:
        raise RuntimeError(f"disagreement between rank0 and rank{dist.get_rank()}: "
                           f"rank0: {rank0_ints}, rank{dist.get_rank()}: {ints}")


def is_builtin_type(obj):
    return obj.__class__.__module__ == '__builtin__' or obj.__class__.__module__ == "builtins"


def isinstance_namedtuple(obj: object) -> bool:
    return isinstance(obj, tuple) and hasattr(obj, '_asdict') and hasattr(obj, '_fields')


def is_zero_param(parameter):
    if not torch.is_tensor(parameter):
        return False
    return hasattr(parameter, 'ds_id')


def apply_to_tensors_only(function, value, warning_msg_fn=None):
    """
    Apply `function` to every Tensor in `value`.
    """
    if isinstance(value, (tuple, list)):
        touched_outputs = []
        for elem in value:
            touched_output = apply_to_tensors_only(function, elem)
            touched_outputs.append(touched_output)

        if isinstance_namedtuple(value):
            return value.__class__(*touched_outputs)

        return value.__class__(touched_outputs)
    elif isinstance(value, dict):
        for key in value.keys():
            value[key] = apply_to_tensors_only(function, value[key])
        return value

    elif isinstance(value, torch.Tensor):
        touched_output = function(value)
        if not is_zero_param(touched_output) and is_zero_param(value):
            touched_output.ds_param_alias = value
        return touched_output
    else:
        if not is_builtin_type(value):
            global warned
            if warning_msg_fn and not warned and dist.get_rank() == 0:
                logger.warning(warning_msg_fn(value))
                warned = True
        return value
