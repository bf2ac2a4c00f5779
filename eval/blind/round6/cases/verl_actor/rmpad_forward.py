import torch
from torch.utils.checkpoint import checkpoint

from verl.utils.torch_functional import entropy_from_logits, logprobs_from_logits
from verl.utils.ulysses import gather_outputs_and_unpad, ulysses_pad_and_slice_inputs


def forward_rmpad(module, cfg, meta, input_ids_rmpad, position_ids_rmpad, sp_size: int):
    rolled = torch.roll(input_ids_rmpad, shifts=-1, dims=1)
    pad_size = 0
    sliced = sp_size > 1 and meta.needs_backward
    if sliced:
        input_ids_rmpad, position_ids_rmpad, pad_size = ulysses_pad_and_slice_inputs(
            input_ids_rmpad, position_ids_rmpad, sp_size=sp_size
        )
        rolled, _, _ = ulysses_pad_and_slice_inputs(rolled, None, sp_size)
    rolled = rolled.squeeze(0)

    use_fused = cfg.get("use_fused_kernels", False) and meta.needs_backward
    if use_fused:
        output = module(input_ids=input_ids_rmpad, position_ids=position_ids_rmpad,
                        use_cache=False, temperature=meta.temperature)
        log_probs = output.log_probs.squeeze(0)
        entropy = output.entropy.squeeze(0) if meta.calculate_entropy else None
    else:
        output = module(input_ids=input_ids_rmpad, position_ids=position_ids_rmpad, use_cache=False)
        logits = output.logits.squeeze(0).div_(meta.temperature)
        log_probs = logprobs_from_logits(logits=logits, labels=rolled)
        entropy = None
        if meta.calculate_entropy:
            if meta.needs_backward and cfg.get("entropy_checkpointing", False):
                entropy = checkpoint(entropy_from_logits, logits, use_reentrant=False)
            else:
                entropy = entropy_from_logits(logits)

    if sliced:
        log_probs = gather_outputs_and_unpad(log_probs, gather_dim=0, unpad_dim=0, padding_size=pad_size)
        if entropy is not None:
            entropy = gather_outputs_and_unpad(entropy, gather_dim=0, unpad_dim=0, padding_size=pad_size)
    return log_probs, entropy
