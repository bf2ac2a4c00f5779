import contextlib

import torch
from torch.distributed.tensor.experimental import context_parallel
from torch.distributed.tensor.experimental._attention import set_rotate_method


def choose_rotate_method(configured: str, needs_backward: bool) -> str:
    return configured if needs_backward else "allgather"


def maybe_enable_context_parallel(cp_mesh, buffers, seq_dims, no_restore_buffers, rotate_method):
    if cp_mesh is None:
        return contextlib.nullcontext()
    set_rotate_method(rotate_method)
    return context_parallel(
        cp_mesh, buffers=buffers, buffer_seq_dims=seq_dims, no_restore_buffers=no_restore_buffers
    )
