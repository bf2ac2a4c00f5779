from typing import Any, List, Optional

import torch
import torch.distributed as dist


class PipelineP2PCommunication:
    def __init__(self, stage_manager, overlap_p2p: bool = True) -> None:
        self.stage_manager = stage_manager
        self.overlap_p2p = overlap_p2p

    def _send_metadata(self, obj: Any, dst: int):
        dist.send_object_list([[t.shape, t.dtype] for t in obj], dst=dst)

    def send_forward(self, output_object: Any, next_rank: Optional[int] = None, send_metadata: bool = True):
        if next_rank is None:
            next_rank = self.stage_manager.get_next_rank()
        tensors = output_object if isinstance(output_object, (list, tuple)) else [output_object]
        if send_metadata:
            self._send_metadata(tensors, next_rank)
        works = [dist.isend(t.contiguous(), next_rank) for t in tensors]
        if not self.overlap_p2p:
            for w in works:
                w.wait()
        return works

    def recv_forward(self, prev_rank: Optional[int] = None, metadata_recv=None):
        if prev_rank is None:
            prev_rank = self.stage_manager.get_prev_rank()
        if metadata_recv is None:
            meta: List[Any] = [None]
            dist.recv_object_list(meta, src=prev_rank)
            metadata_recv = meta[0]
        bufs = [torch.empty(shape, dtype=dtype, device="cuda") for shape, dtype in metadata_recv]
        for b in bufs:
            dist.recv(b, prev_rank)
        return bufs, metadata_recv
