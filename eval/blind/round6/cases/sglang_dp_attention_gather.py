"""Gather/scatter of hidden states between attention-DP ranks and the dense TP group."""
from enum import Enum, auto

import torch

from sglang.srt.distributed import (
    get_attention_dp_size,
    get_attention_tp_group,
    get_tp_group,
    tensor_model_parallel_all_reduce,
)


class DpGatherMode(Enum):
    ALL_GATHER = auto()
    ALL_REDUCE = auto()


def _pad_to_global(local: torch.Tensor, global_tokens: int, start: int) -> torch.Tensor:
    out = local.new_zeros((global_tokens, local.shape[-1]))
    out[start : start + local.shape[0]].copy_(local)
    return out


def select_gather_mode(forward_batch) -> DpGatherMode:
    graph_ok = forward_batch.can_run_dp_cuda_graph
    match (graph_ok, torch.is_inference_mode_enabled()):
        case (True, True):
            return DpGatherMode.ALL_GATHER
        case _:
            return DpGatherMode.ALL_REDUCE


def dp_gather(global_buf: torch.Tensor, local: torch.Tensor, forward_batch) -> torch.Tensor:
    if get_attention_dp_size() == 1:
        return local
    start = forward_batch.dp_local_start_pos
    mode = select_gather_mode(forward_batch)
    if mode is DpGatherMode.ALL_GATHER:
        get_tp_group().all_gather_into_tensor(global_buf, local)
        return global_buf
    padded = _pad_to_global(local, global_buf.shape[0], start)
    return tensor_model_parallel_all_reduce(padded)


def dp_scatter(local_buf: torch.Tensor, global_tokens: torch.Tensor, forward_batch) -> torch.Tensor:
    start = forward_batch.dp_local_start_pos
    n = forward_batch.dp_local_num_tokens
    local_buf.copy_(global_tokens[start : start + n])
    return local_buf


def capture_dp_graph(runner, forward_batch):
    if torch.is_grad_enabled():
        raise RuntimeError("CUDA graph capture for DP attention requires grad to be disabled")
    group = get_attention_tp_group()
    with torch.cuda.graph(runner.graph, pool=runner.pool, stream=group.stream):
        runner.output = runner.model.forward(forward_batch)
    return runner
