# Modelled on megatron/core/pipeline_parallel/p2p_communication.py and schedules.py (Megatron-LM core_r0.9).
from typing import List, Optional, Union

import torch

from megatron.core import parallel_state
from megatron.core.pipeline_parallel.p2p_communication import _batched_p2p_ops, _p2p_ops

Shape = Union[List[int], torch.Size]


def _communicate(*, tensor_send_next: Optional[torch.Tensor], tensor_send_prev: Optional[torch.Tensor],
                 recv_prev: bool, recv_next: bool, tensor_shape: Shape, config, wait_on_reqs: bool = True):
    tensor_recv_prev = None
    tensor_recv_next = None
    if recv_prev:
        tensor_recv_prev = torch.empty(tensor_shape, requires_grad=True, device=torch.cuda.current_device(),
                                       dtype=config.pipeline_dtype)
    if recv_next:
        tensor_recv_next = torch.empty(tensor_shape, requires_grad=True, device=torch.cuda.current_device(),
                                       dtype=config.pipeline_dtype)

    if config.use_ring_exchange_p2p:
        def _ring_exchange_wrapper(**kwargs):
            torch.distributed.ring_exchange(**kwargs)
            return []
        p2p_func = _ring_exchange_wrapper
    elif config.batch_p2p_comm and torch.is_grad_enabled():
        assert wait_on_reqs
        p2p_func = _batched_p2p_ops
    else:
        p2p_func = _p2p_ops

    reqs = p2p_func(
        tensor_send_prev=tensor_send_prev,
        tensor_recv_prev=tensor_recv_prev,
        tensor_send_next=tensor_send_next,
        tensor_recv_next=tensor_recv_next,
        group=parallel_state.get_pipeline_model_parallel_group(),
        prev_pipeline_rank=parallel_state.get_pipeline_model_parallel_prev_rank(),
        next_pipeline_rank=parallel_state.get_pipeline_model_parallel_next_rank(),
    )
    if wait_on_reqs and len(reqs) > 0:
        for req in reqs if isinstance(reqs, list) else reqs.values():
            req.wait()
        reqs = None
    if config.batch_p2p_comm and config.batch_p2p_sync:
        torch.cuda.synchronize()
    return tensor_recv_prev, tensor_recv_next, reqs


def deallocate_output_tensor(out, deallocate_pipeline_outputs=False):
    if (out is None) or (not deallocate_pipeline_outputs):
        return
    assert isinstance(out, torch.Tensor), "expected Tensor, found %s." % type(out).__name__
    assert out._base is None, "counter-productive to free a view of another tensor."
    out.data = torch.empty((1,), device=out.device, dtype=out.dtype)


def send_forward(output_tensors, tensor_shapes, config):
    if not parallel_state.is_pipeline_last_stage():
        _communicate(tensor_send_next=output_tensors, tensor_send_prev=None, recv_prev=False, recv_next=False,
                     tensor_shape=tensor_shapes, config=config)


def run_forward_stage(forward_step_func, data_iterator, model, input_tensor, tensor_shape, config,
                      output_tensors: list):
    output_tensor = forward_step_func(data_iterator, model, input_tensor)
    send_forward(output_tensor, tensor_shape, config)
    if torch.is_grad_enabled():
        output_tensors.append(output_tensor)
        deallocate_output_tensor(output_tensor, config.deallocate_pipeline_outputs)
    return output_tensor
