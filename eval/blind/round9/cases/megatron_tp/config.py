from dataclasses import dataclass
from typing import Optional

import torch


@dataclass
class ModelParallelConfig:
    tensor_model_parallel_size: int = 1
    sequence_parallel: bool = False
    gradient_accumulation_fusion: bool = False
    async_tensor_model_parallel_allreduce: bool = True
    tp_comm_overlap: bool = False
    tp_comm_overlap_ag: bool = True
    tp_comm_overlap_rs: bool = True
    tp_comm_overlap_rs_num_chunks: int = 4
    params_dtype: torch.dtype = torch.float32
    defer_embedding_wgrad_compute: bool = False


@dataclass(frozen=True)
class LinearCommState:
    grad_enabled: bool
    sequence_parallel: bool
    world_size: int
    tp_group: Optional[torch.distributed.ProcessGroup] = None


def make_comm_state(config: ModelParallelConfig, tp_group=None) -> LinearCommState:
    world_size = torch.distributed.get_world_size(tp_group) if torch.distributed.is_initialized() else 1
    return LinearCommState(
        grad_enabled=torch.is_grad_enabled(),
        sequence_parallel=config.sequence_parallel and world_size > 1,
        world_size=world_size,
        tp_group=tp_group,
    )
