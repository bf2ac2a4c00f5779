# adapted from OpenRLHF/OpenRLHF openrlhf/models/ring_attn_utils.py
import torch
import torch.distributed as dist
from flash_attn.bert_padding import pad_input
from flash_attn.utils.distributed import all_gather

RING_ATTN_GROUP = None
RING_ATTN_GRAD = True


def set_ring_attn_group(group):
    global RING_ATTN_GROUP
    RING_ATTN_GROUP = group


def get_ring_attn_group():
    return RING_ATTN_GROUP


def update_ring_attn_params(cu_seqlens):
    global RING_ATTN_GRAD
    assert RING_ATTN_GROUP is not None
    from ring_flash_attn import update_ring_flash_attn_params

    RING_ATTN_GRAD = torch.is_grad_enabled()
    update_ring_flash_attn_params(cu_seqlens, RING_ATTN_GROUP)


def _broadcast_gather(tensor, group):
    world_size = dist.get_world_size(group)
    chunks = []
    for src in range(world_size):
        buf = tensor.contiguous() if dist.get_rank(group) == src else torch.empty_like(tensor)
        dist.broadcast(buf, src=dist.get_global_rank(group, src), group=group)
        chunks.append(buf)
    return torch.cat(chunks, dim=0)


def gather_and_pad_tensor(tensor, ring_attn_group, ring_attn_pad_len, indices, batch, seqlen):
    tensor = tensor.detach() if not torch.is_grad_enabled() else tensor
    if ring_attn_group is not None:
        gather_fn = all_gather if RING_ATTN_GRAD else _broadcast_gather
        tensor = gather_fn(tensor.transpose(0, 1), ring_attn_group).transpose(0, 1)
        if ring_attn_pad_len > 0:
            tensor = tensor[:, :-ring_attn_pad_len]
    tensor = pad_input(tensor.transpose(0, 1), indices, batch, seqlen).squeeze(-1)
    return tensor
