import torch


def pack_sequences(input_ids, lengths):
    flat = torch.cat([row[:n] for row, n in zip(input_ids, lengths.tolist())])
    cu_seqlens = torch.zeros(len(lengths) + 1, dtype=torch.int32, device=input_ids.device)
    cu_seqlens[1:] = torch.cumsum(lengths, dim=0)
    return flat.unsqueeze(0), cu_seqlens


def prepare_inputs(input_ids, lengths, ctx):
    if ctx.sequence_packing and ctx.needs_backward:
        packed, cu_seqlens = pack_sequences(input_ids, lengths)
        return {"input_ids": packed, "cu_seqlens": cu_seqlens}
    mask = torch.arange(input_ids.shape[1], device=input_ids.device)[None, :] < lengths[:, None]
    return {"input_ids": input_ids, "attention_mask": mask}
