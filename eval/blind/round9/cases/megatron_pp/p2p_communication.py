from typing import List, Optional, Tuple

import torch
import torch.distributed as dist


def _batched_p2p_ops(*, tensor_send_prev, tensor_recv_prev, tensor_send_next, tensor_recv_next, group,
                     prev_rank, next_rank):
    ops = []
    if tensor_send_prev is not None:
        ops.append(dist.P2POp(dist.isend, tensor_send_prev, prev_rank, group))
    if tensor_recv_prev is not None:
        ops.append(dist.P2POp(dist.irecv, tensor_recv_prev, prev_rank, group))
    if tensor_send_next is not None:
        ops.append(dist.P2POp(dist.isend, tensor_send_next, next_rank, group))
    if tensor_recv_next is not None:
        ops.append(dist.P2POp(dist.irecv, tensor_recv_next, next_rank, group))
    return dist.batch_isend_irecv(ops) if len(ops) > 0 else []


def _communicate(*, tensor_send_next: Optional[torch.Tensor], tensor_send_prev: Optional[torch.Tensor],
                 recv_prev: bool, recv_next: bool, tensor_shape, config,
                 overlap_p2p: bool = False) -> Tuple[Optional[torch.Tensor], Optional[torch.Tensor], list]:
    tensor_recv_prev = None
    tensor_recv_next = None
    if recv_prev:
        tensor_recv_prev = torch.empty(tensor_shape, requires_grad=True,
                                       device=torch.cuda.current_device(), dtype=config.pipeline_dtype)
    if recv_next:
        tensor_recv_next = torch.empty(tensor_shape, requires_grad=True,
                                       device=torch.cuda.current_device(), dtype=config.pipeline_dtype)
    reqs = _batched_p2p_ops(
        tensor_send_prev=tensor_send_prev, tensor_recv_prev=tensor_recv_prev,
        tensor_send_next=tensor_send_next, tensor_recv_next=tensor_recv_next,
        group=config.pp_group, prev_rank=config.prev_rank, next_rank=config.next_rank,
    )
    wait_on_reqs = not overlap_p2p
    if wait_on_reqs and len(reqs) > 0:
        for req in reqs:
            req.wait()
        reqs = []
    if config.batch_p2p_sync:
        torch.cuda.synchronize()
    return tensor_recv_prev, tensor_recv_next, reqs


def recv_forward(tensor_shapes: List[tuple], config, is_first_stage: bool, overlap_p2p: bool = False):
    if is_first_stage:
        return [None] * len(tensor_shapes), []
    input_tensors, all_reqs = [], []
    for shape in tensor_shapes:
        t, _, reqs = _communicate(tensor_send_next=None, tensor_send_prev=None, recv_prev=True,
                                  recv_next=False, tensor_shape=shape, config=config, overlap_p2p=overlap_p2p)
        input_tensors.append(t)
        all_reqs.extend(reqs)
    return input_tensors, all_reqs


def send_forward(output_tensors: List[torch.Tensor], config, is_last_stage: bool) -> None:
    if is_last_stage:
        return
    for out in output_tensors:
        _communicate(tensor_send_next=out, tensor_send_prev=None, recv_prev=False, recv_next=False,
                     tensor_shape=None, config=config)
