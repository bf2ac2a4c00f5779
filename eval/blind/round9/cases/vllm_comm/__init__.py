from .communication_op import tensor_model_parallel_all_gather, tensor_model_parallel_all_reduce
from .forward_context import ForwardContext, get_forward_context, set_forward_context
from .parallel_state import GroupCoordinator, get_tp_group

__all__ = [
    "ForwardContext",
    "GroupCoordinator",
    "get_forward_context",
    "get_tp_group",
    "set_forward_context",
    "tensor_model_parallel_all_gather",
    "tensor_model_parallel_all_reduce",
]
