from typing import List

import torch
import torch.distributed as dist


class AllGatherCoalescedHandle:
    def __init__(self, work, params, partitions, quantized):
        self.work = work
        self.params = params
        self.partitions = partitions
        self.quantized = quantized

    def wait(self):
        self.work.wait()
        for param, buf in zip(self.params, self.partitions):
            param.data = buf.dequantize() if self.quantized else buf


def all_gather_coalesced(params: List[torch.nn.Parameter], ctx, quantize: bool = False):
    use_quantized = quantize and ctx.needs_backward
    world_size = dist.get_world_size(params[0].ds_process_group)
    flat = torch.cat([p.ds_tensor.flatten() for p in params])
    if use_quantized:
        flat = params[0].ds_quantizer.quantize(flat)
    out = torch.empty(flat.numel() * world_size, dtype=flat.dtype, device=flat.device)
    work = dist.all_gather_into_tensor(out, flat, group=params[0].ds_process_group, async_op=True)
    return AllGatherCoalescedHandle(work, params, [out], use_quantized)
