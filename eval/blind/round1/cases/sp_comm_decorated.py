"""Sequence-parallel communication helpers that receive the autograd mode through a decorator."""
import functools

import torch
import torch.distributed as dist

_CHUNKED_AG_MIN_NUMEL = 1 << 22
_comm_stream = None


def _get_comm_stream():
    global _comm_stream
    if _comm_stream is None:
        _comm_stream = torch.cuda.Stream(priority=-1)
    return _comm_stream


def with_grad_mode(fn):
    """Inject the caller's autograd mode as the ``grad_enabled`` keyword argument."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        kwargs.setdefault("grad_enabled", torch.is_grad_enabled())
        return fn(*args, **kwargs)

    return wrapper


@with_grad_mode
def gather_along_first_dim(input_: torch.Tensor, group, *, num_chunks: int = 4, grad_enabled: bool = False):
    """All-gather the sequence-parallel shards of ``input_`` along dim 0."""
    world_size = dist.get_world_size(group)
    if world_size == 1:
        return input_
    input_ = input_.contiguous()
    dim_size = list(input_.size())
    dim_size[0] *= world_size
    output = torch.empty(dim_size, dtype=input_.dtype, device=input_.device)

    if num_chunks > 1 and grad_enabled and input_.numel() >= _CHUNKED_AG_MIN_NUMEL:
        # Pipelined all-gather along the hidden dim on a high-priority side stream so the
        # consumer GEMM can start on the first chunk.
        stream = _get_comm_stream()
        stream.wait_stream(torch.cuda.current_stream())
        out_chunks = output.chunk(num_chunks, dim=-1)
        in_chunks = input_.chunk(num_chunks, dim=-1)
        with torch.cuda.stream(stream):
            handles = []
            for out_c, in_c in zip(out_chunks, in_chunks):
                tmp = torch.empty((dim_size[0],) + tuple(in_c.shape[1:]), dtype=in_c.dtype, device=in_c.device)
                handles.append((dist.all_gather_into_tensor(tmp, in_c.contiguous(), group=group, async_op=True),
                                tmp, out_c))
        for handle, tmp, out_c in handles:
            handle.wait()
            out_c.copy_(tmp)
        torch.cuda.current_stream().wait_stream(stream)
    else:
        dist.all_gather_into_tensor(output, input_, group=group)
    return output


@with_grad_mode
def reduce_scatter_along_first_dim(input_: torch.Tensor, group, *, grad_enabled: bool = False):
    world_size = dist.get_world_size(group)
    if world_size == 1:
        return input_
    dim_size = list(input_.size())
    assert dim_size[0] % world_size == 0
    dim_size[0] //= world_size
    output = torch.empty(dim_size, dtype=input_.dtype, device=input_.device)
    dist.reduce_scatter_tensor(output, input_.contiguous(), group=group)
    return output


@with_grad_mode
def maybe_checkpoint(fn, *args, use_checkpoint: bool = True, grad_enabled: bool = False):
    if use_checkpoint and grad_enabled:
        return torch.utils.checkpoint.checkpoint(fn, *args, use_reentrant=False)
    return fn(*args)
