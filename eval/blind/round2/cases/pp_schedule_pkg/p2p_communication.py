# Modelled on Megatron-LM megatron/core/pipeline_parallel/p2p_communication.py
from typing import Optional

import torch


def _batched_p2p_ops(*, tensor_send_prev, tensor_recv_prev, tensor_send_next, tensor_recv_next, group,
                     prev_pipeline_rank, next_pipeline_rank):
    ops = []
    if tensor_send_prev is not None:
        ops.append(torch.distributed.P2POp(torch.distributed.isend, tensor_send_prev, prev_pipeline_rank, group))
    if tensor_recv_prev is not None:
        ops.append(torch.distributed.P2POp(torch.distributed.irecv, tensor_recv_prev, prev_pipeline_rank, group))
    if tensor_send_next is not None:
        ops.append(torch.distributed.P2POp(torch.distributed.isend, tensor_send_next, next_pipeline_rank, group))
    if tensor_recv_next is not None:
        ops.append(torch.distributed.P2POp(torch.distributed.irecv, tensor_recv_next, next_pipeline_rank, group))
    return torch.distributed.batch_isend_irecv(ops) if ops else []


def _p2p_ops(*, tensor_send_prev, tensor_recv_prev, tensor_send_next, tensor_recv_next, group,
             prev_pipeline_rank, next_pipeline_rank):
    reqs = {}
    even_send_odd_recv_group = group
    if group.size() == 2 and torch.distributed.get_backend(group) != 'ucc':
        # Use the global process group for one of the two p2p communications
        # to allow the overlap of the independent communications.
        even_recv_odd_send_group = torch.distributed.group.WORLD
    else:
        even_recv_odd_send_group = group
    if group.rank() % 2 == 0:
        if tensor_send_next is not None:
            reqs["send_next"] = torch.distributed.isend(tensor_send_next, next_pipeline_rank, even_send_odd_recv_group)
        if tensor_recv_prev is not None:
            reqs["recv_prev"] = torch.distributed.irecv(tensor_recv_prev, prev_pipeline_rank, even_recv_odd_send_group)
    else:
        if tensor_recv_prev is not None:
            reqs["recv_prev"] = torch.distributed.irecv(tensor_recv_prev, prev_pipeline_rank, even_send_odd_recv_group)
        if tensor_send_next is not None:
            reqs["send_next"] = torch.distributed.isend(tensor_send_next, next_pipeline_rank, even_recv_odd_send_group)
    return reqs


class P2PCommunicator:
    def __init__(self, pp_group: torch.distributed.ProcessGroup, config):
        self.pp_group = pp_group
        self.config = config
        world_size = pp_group.size()
        rank = pp_group.rank()
        self.next_rank = torch.distributed.get_global_rank(pp_group, (rank + 1) % world_size)
        self.prev_rank = torch.distributed.get_global_rank(pp_group, (rank - 1) % world_size)

    def _communicate(self, *, tensor_send_next: Optional[torch.Tensor], tensor_send_prev: Optional[torch.Tensor],
                     recv_prev: bool, recv_next: bool, tensor_shape, wait_on_reqs: bool = True,
                     grad_enabled: bool = True):
        config = self.config

        def create_recv_buffer():
            return torch.empty(
                tensor_shape,
                requires_grad=grad_enabled,
                device=torch.cuda.current_device(),
                dtype=config.pipeline_dtype,
            )

        if config.use_ring_exchange_p2p:
            def _ring_exchange_wrapper(**kwargs):
                torch.distributed.ring_exchange(**kwargs)
                return []

            p2p_func = _ring_exchange_wrapper
        elif config.batch_p2p_comm and grad_enabled:
            assert wait_on_reqs
            p2p_func = _batched_p2p_ops
        else:
            p2p_func = _p2p_ops

        tensor_recv_prev = create_recv_buffer() if recv_prev else None
        tensor_recv_next = create_recv_buffer() if recv_next else None
        p2p_reqs = p2p_func(
            tensor_send_prev=tensor_send_prev,
            tensor_recv_prev=tensor_recv_prev,
            tensor_send_next=tensor_send_next,
            tensor_recv_next=tensor_recv_next,
            group=self.pp_group,
            prev_pipeline_rank=self.prev_rank,
            next_pipeline_rank=self.next_rank,
        )
        reqs = p2p_reqs if isinstance(p2p_reqs, list) else list(p2p_reqs.values())
        if wait_on_reqs and len(reqs) > 0:
            for req in reqs:
                req.wait()
            reqs = None
        return tensor_recv_prev, tensor_recv_next, reqs

    def send_forward_recv_forward(self, output_tensor, recv_prev: bool, tensor_shape,
                                  overlap_p2p_comm: bool = False, grad_enabled: bool = True):
        """Batched recv from previous rank and send to next rank in pipeline."""
        wait_on_reqs = not (overlap_p2p_comm and grad_enabled)
        input_tensor, _, wait_handles = self._communicate(
            tensor_send_next=output_tensor,
            tensor_send_prev=None,
            recv_prev=recv_prev,
            recv_next=False,
            tensor_shape=tensor_shape,
            wait_on_reqs=wait_on_reqs,
            grad_enabled=grad_enabled,
        )
        if overlap_p2p_comm:
            return input_tensor, wait_handles
        return input_tensor

    def send_backward(self, input_tensor_grad, tensor_shape):
        self._communicate(tensor_send_next=None, tensor_send_prev=input_tensor_grad, recv_prev=False,
                          recv_next=False, tensor_shape=tensor_shape)
