"""Modelled on torchtitan torchtitan/distributed/utils.py (create_context_parallel_ctx) and
torch/distributed/tensor/experimental/_attention.py (set_rotate_method, _RotateMethod)."""
import contextlib
from typing import List, Set

import torch
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.tensor.experimental import context_parallel
from torch.distributed.tensor.experimental._attention import _cp_options, _RotateMethod


def _pick_rotate_method(cp_rotate_method: str, grad_on: bool) -> _RotateMethod:
    match (cp_rotate_method, grad_on):
        case ("allgather", _):
            return _RotateMethod.ALL_GATHER
        case ("alltoall", True):
            return _RotateMethod.ALL_TO_ALL
        case ("alltoall", False):
            # eval has no backward ring, so a single all-gather of KV is cheaper
            return _RotateMethod.ALL_GATHER
        case _:
            raise ValueError(f"unknown cp_rotate_method {cp_rotate_method}")


def create_context_parallel_ctx(
    cp_mesh: DeviceMesh,
    cp_buffers: List[torch.Tensor],
    cp_seq_dims: List[int],
    cp_no_restore_buffers: Set[torch.Tensor],
    cp_rotate_method: str,
):
    grad_on = torch.is_grad_enabled()
    _cp_options.rotate_method = _pick_rotate_method(cp_rotate_method, grad_on)
    return context_parallel(
        cp_mesh,
        buffers=cp_buffers,
        buffer_seq_dims=cp_seq_dims,
        no_restore_buffers=cp_no_restore_buffers,
    )


def get_train_context(enable_loss_parallel: bool, enable_compiled_autograd: bool):
    @contextlib.contextmanager
    def context(cp_context=None):
        with contextlib.ExitStack() as stack:
            if enable_loss_parallel:
                stack.enter_context(torch.distributed.tensor.parallel.loss_parallel())
            if cp_context is not None:
                from torch.nn.attention import SDPBackend, sdpa_kernel
                stack.enter_context(sdpa_kernel([SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION]))
                stack.enter_context(cp_context)
            yield

    return context
