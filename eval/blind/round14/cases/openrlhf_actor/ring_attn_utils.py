# adapted from OpenRLHF/OpenRLHF openrlhf/models/ring_attn_utils.py
import torch
import torch.distributed as dist
from flash_attn.bert_padding import index_first_axis, pad_input, rearrange, unpad_input
from flash_attn.utils.distributed import all_gather

RING_ATTN_GROUP = None
RING_ATTN_INFER_GROUP = None


def set_ring_attn_group(group, infer_group=None):
    global RING_ATTN_GROUP, RING_ATTN_INFER_GROUP
    RING_ATTN_GROUP = group
    RING_ATTN_INFER_GROUP = infer_group


def get_ring_attn_group(infer_pass: bool = False):
    if infer_pass and RING_ATTN_INFER_GROUP is not None:
        return RING_ATTN_INFER_GROUP
    return RING_ATTN_GROUP


def update_ring_attn_params(cu_seqlens, group):
    """
    Calculate the cu_seqlens for the current forward pass and pass the value to
    the substituted ring_flash_attn.
    """
    assert group is not None

    from ring_flash_attn import update_ring_flash_attn_params

    update_ring_flash_attn_params(cu_seqlens, group)


def get_tensor_in_current_ring_attn_rank(tensors, ring_attn_group, pad_id):
    if isinstance(tensors, torch.Tensor):
        tensors = [tensors]
    ring_attn_rank = dist.get_rank(group=ring_attn_group)
    ring_attn_size = dist.get_world_size(group=ring_attn_group)
    seqlen = tensors[0].shape[-1]
    total_seq_len = tensors[0].numel()
    ring_attn_pad_len = (ring_attn_size - seqlen % ring_attn_size) % ring_attn_size
    output_tensors = []
    for tensor in tensors:
        if tensor.numel() != total_seq_len:
            raise ValueError(f"tensor.numel() {tensor.numel()} != total_seq_len {total_seq_len}")
        tensor = torch.nn.functional.pad(tensor, (0, ring_attn_pad_len), value=pad_id)
        local_seq_len = tensor.numel() // ring_attn_size
        start, end = ring_attn_rank * local_seq_len, (ring_attn_rank + 1) * local_seq_len
        tensor = tensor[:, start:end]
        output_tensors.append(tensor)
    if len(output_tensors) == 1:
        output_tensors = output_tensors[0]
    return output_tensors, ring_attn_pad_len


def unpad_and_slice_tensor(sequences, attention_mask, ring_attn_group):
    """
    Unpad and slice tensor for distributed training with ring attention.
    """
    rolled_sequences = torch.roll(sequences, shifts=-1, dims=1)
    sequences, indices, cu_seqlens, _, _ = unpad_input(sequences.unsqueeze(-1), attention_mask)
    sequences = sequences.transpose(0, 1)  # (1, total_seqs)
    rolled_sequences = index_first_axis(
        rearrange(rolled_sequences.unsqueeze(-1), "b s ... -> (b s) ..."), indices
    ).transpose(0, 1)
    position_ids = torch.clip(torch.cumsum(attention_mask, dim=-1) - 1, min=0, max=None)
    position_ids = index_first_axis(rearrange(position_ids.unsqueeze(-1), "b s ... -> (b s) ..."), indices).transpose(
        0, 1
    )
    ring_attn_pad_len = 0
    if ring_attn_group is not None:
        (sequences, position_ids, rolled_sequences), ring_attn_pad_len = get_tensor_in_current_ring_attn_rank(
            [sequences, position_ids, rolled_sequences], ring_attn_group, 0
        )
        cu_seqlens[-1] += ring_attn_pad_len
        update_ring_attn_params(cu_seqlens, ring_attn_group)
    return sequences, position_ids, rolled_sequences, ring_attn_pad_len, indices


def _all_gather_no_grad(tensor, group):
    world_size = dist.get_world_size(group)
    output = torch.empty(world_size * tensor.shape[0], *tensor.shape[1:], dtype=tensor.dtype, device=tensor.device)
    dist.all_gather_into_tensor(output, tensor.contiguous(), group=group)
    return output


def gather_and_pad_tensor(tensor, ring_attn_group, ring_attn_pad_len, indices, batch, seqlen):
    """
    Gather and pad tensor data (such as logits, log_probs, etc.).
    """
    if ring_attn_group is not None:
        gather_fn = all_gather if torch.is_grad_enabled() else _all_gather_no_grad
        tensor = gather_fn(tensor.transpose(0, 1), ring_attn_group).transpose(0, 1)  # (1, total_seqs)
        if ring_attn_pad_len > 0:
            tensor = tensor[:, :-ring_attn_pad_len]
    tensor = pad_input(tensor.transpose(0, 1), indices, batch, seqlen).squeeze(-1)  # (batch, seqlen)
    return tensor


HACKED_POSITION_IDS = None


# Both ring and our hack substitute flash_attn. This func must be called after ring's substitue_hf_flash_attn.
def substitute_ring_flash_attn():
    import transformers

    raw_flash_attention_forward = transformers.modeling_flash_attention_utils._flash_attention_forward

    def _hacked_flash_attention_forward(*args, **kwargs):
        global HACKED_POSITION_IDS
        if HACKED_POSITION_IDS is not None and torch.is_grad_enabled():
            kwargs['position_ids'] = HACKED_POSITION_IDS
        return raw_flash_attention_forward(*args, **kwargs)

    transformers.modeling_flash_attention_utils._flash_attention_forward = _hacked_flash_attention_forward


def set_hacked_position_ids(position_ids):
    global HACKED_POSITION_IDS
    HACKED_POSITION_IDS = position_ids


def clear_hacked_position_ids():
    global HACKED_POSITION_IDS
    HACKED_POSITION_IDS = None
