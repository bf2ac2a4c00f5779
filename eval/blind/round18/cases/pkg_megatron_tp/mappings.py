# adapted from NVIDIA/Megatron-LM megatron/core/tensor_parallel/layers.py
import torch

from megatron.core.utils import get_tensor_model_parallel_group_if_none

# Whether forward TP all-reduces are issued asynchronously (overlapped with the
# following bias/dropout/residual). Set once per step by the layers.
_TP_COMM_OVERLAP = False


def set_tp_comm_overlap(enabled: bool) -> None:
    global _TP_COMM_OVERLAP
    _TP_COMM_OVERLAP = enabled


def _reduce(input_, group):
    """All-reduce the input tensor across model parallel group."""
    assert group is not None, "group should not be None"

    # Bypass the function if we are using only 1 GPU.
    if group.size() == 1:
        return input_

    # All-reduce.
    if _TP_COMM_OVERLAP:
        handle = torch.distributed.all_reduce(input_.contiguous(), group=group, async_op=True)
        handle.wait()
    else:
        torch.distributed.all_reduce(input_.contiguous(), group=group)

    return input_


class _ReduceFromModelParallelRegion(torch.autograd.Function):
    """All-reduce the input from the model parallel region."""

    @staticmethod
    def symbolic(graph, input_, group):
        """Symbolic function for tracing."""
        return _reduce(input_, group)

    @staticmethod
    def forward(ctx, input_, group):
        """Forward function."""
        return _reduce(input_, group)

    @staticmethod
    def backward(ctx, grad_output):
        """Backward function."""
        return grad_output, None


def reduce_from_tensor_model_parallel_region(input_, group=None):
    """Wrapper for autograd function: forward: AR, backward: identity"""
    group = get_tensor_model_parallel_group_if_none(group)
    return _ReduceFromModelParallelRegion.apply(input_, group)
