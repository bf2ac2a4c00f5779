# adapted from Ace1928/eidosian_forge archive_forge/code/class__AllReduce.py
import torch.distributed as dist


def sync_module_states_if(ddp, grad_enabled):
    if grad_enabled and ddp.will_sync_module_buffers():
        for buf in ddp.modules_buffers:
            dist.broadcast(buf, src=0, group=ddp.process_group)
