from typing import List

import torch
import torch.distributed as dist


def send_activations(tensors: List[torch.Tensor], peer: int, group, meta: dict) -> List[dist.Work]:
    works: List[dist.Work] = []
    if meta["grad"]:
        ops = [dist.P2POp(dist.isend, t, peer, group) for t in tensors]
        works.extend(dist.batch_isend_irecv(ops))
    else:
        for t in tensors:
            dist.send(t, dst=peer, group=group)
    return works


def recv_activations(shapes, dtype, device, peer: int, group) -> List[torch.Tensor]:
    bufs = [torch.empty(s, dtype=dtype, device=device) for s in shapes]
    ops = [dist.P2POp(dist.irecv, b, peer, group) for b in bufs]
    for w in dist.batch_isend_irecv(ops):
        w.wait()
    return bufs
