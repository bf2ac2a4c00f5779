# adapted from huggingface/nanotron src/nanotron/parallel/tensor_parallel/functional.py
from torch.nn import functional as F

from nanotron.parallel.tensor_parallel.distributed_differentiable_primitives import (
    differentiable_all_gather,
    differentiable_identity,
)
from nanotron.parallel.tensor_parallel.enum import TensorParallelLinearMode

from .flags import grad_flags
from .functional import _ColumnLinearAsyncCommunication


def column_linear(input, weight, bias, group, tp_mode, async_communication, tp_recompute_allgather=True):
    grad, inference = grad_flags()
    match tp_mode:
        case TensorParallelLinearMode.REDUCE_SCATTER if async_communication and grad and not inference:
            return _ColumnLinearAsyncCommunication.apply(
                input, weight, bias, group, tp_mode,
                tp_recompute_allgather and grad,
            )
        case TensorParallelLinearMode.ALL_REDUCE:
            input = differentiable_identity(input, group=group)
        case TensorParallelLinearMode.REDUCE_SCATTER:
            input = differentiable_all_gather(input, group=group)
        case _:
            raise ValueError(f"Got unexpected mode: {tp_mode}.")
    return F.linear(input, weight, bias)
