import torch
import torch.distributed as dist


def update_ring_attn_params(packed_seq_lens, total_seq_len):
    from ring_flash_attn import update_ring_flash_attn_params
    cu_seqlens = torch.cumsum(torch.tensor(packed_seq_lens, device=torch.cuda.current_device(), dtype=torch.int32),
                              dim=-1, dtype=torch.int32)
    cu_seqlens = torch.nn.functional.pad(cu_seqlens, (1, 0), value=0)
    update_ring_flash_attn_params(cu_seqlens, None)


def convert_ring_attn_params(sequences, attention_mask, packed_seq_lens, ring_attn_group, grad_enabled=True):
    ring_attn_rank = dist.get_rank(group=ring_attn_group)
    ring_attn_size = dist.get_world_size(group=ring_attn_group)
    total_seq_len = sequences.numel()
    if not grad_enabled:
        # whole packed sequence on every rank, no ring exchange of K/V
        return sequences, attention_mask, None
    local_seq_len = total_seq_len // ring_attn_size
    start, end = ring_attn_rank * local_seq_len, (ring_attn_rank + 1) * local_seq_len
    sequences = sequences[:, start:end]
    attention_mask = attention_mask[:, start:end]
    position_ids = torch.cat([torch.arange(n, device=sequences.device) for n in packed_seq_lens]).unsqueeze(0)
    position_ids = position_ids[:, start:end]
    update_ring_attn_params(packed_seq_lens, total_seq_len)
    return sequences, attention_mask, position_ids
