# Modelled on colossalai/pipeline/p2p.py (ColossalAI v0.4).
from typing import Any, List, Optional

import torch
import torch.distributed as dist
from torch.distributed import ProcessGroup


def _batch_send_recv_tensor(send_tensor_list, recv_tensor_metadata, send_dst, recv_src, send_group, recv_group,
                            current_device, overlap_p2p=True, send_first=True):
    buffer_recv = None
    if recv_tensor_metadata is not None:
        buffer_recv = [torch.empty(m.shape, dtype=m.dtype, device=current_device) for m in recv_tensor_metadata]
    ops = []
    if send_dst is not None and send_tensor_list is not None:
        ops.extend(dist.P2POp(dist.isend, t, send_dst, send_group) for t in send_tensor_list)
    if recv_src is not None and buffer_recv is not None:
        ops.extend(dist.P2POp(dist.irecv, t, recv_src, recv_group) for t in buffer_recv)
    reqs = dist.batch_isend_irecv(ops) if ops else []
    if not overlap_p2p:
        for req in reqs:
            req.wait()
        return buffer_recv, []
    return buffer_recv, reqs


def _send_recv_serialization_object(obj, send_dst, recv_src, send_group, recv_group, current_device):
    if send_dst is not None:
        dist.send_object_list([obj], dst=send_dst, group=send_group, device=current_device)
    return None


class PipelineP2PCommunication:
    def __init__(self, stage_manager, overlap_p2p: bool = True) -> None:
        self.stage_manager = stage_manager
        self.overlap_p2p = overlap_p2p
        self.send_metadata_forward = True

    def _communicate(self, object: Any, send_dst: Optional[int], recv_src: Optional[int],
                     send_group: Optional[ProcessGroup] = None, recv_group: Optional[ProcessGroup] = None,
                     send_metadata: bool = True, metadata_recv=None, grad_on: bool = True):
        tensors = [object] if isinstance(object, torch.Tensor) else None
        if send_metadata:
            _send_recv_serialization_object(object, send_dst, recv_src, send_group, recv_group,
                                            torch.cuda.current_device())
        return _batch_send_recv_tensor(
            tensors, metadata_recv, send_dst, recv_src, send_group, recv_group,
            current_device=torch.cuda.current_device(),
            overlap_p2p=self.overlap_p2p and grad_on,
        )

    def send_forward(self, output_object: Any, next_rank: Optional[int] = None, send_metadata: bool = True,
                     grad_on: bool = True) -> List[torch.cuda.Event]:
        if next_rank is None:
            next_rank = self.stage_manager.get_next_rank()
        _, handles = self._communicate(
            output_object, next_rank, None, send_group=self.stage_manager.get_p2p_process_group(),
            send_metadata=send_metadata, grad_on=grad_on,
        )
        return handles
