# Adapted from vllm-project/vllm vllm/v1/sample/sampler.py and ops/topk_topp_sampler.py
import torch

from .flags import runtime_flags


def apply_top_k(logits, k, flags):
    vals, idx = torch.topk(logits, k, dim=-1, sorted=flags["grad"])
    mask = torch.full_like(logits, float("-inf"))
    return mask.scatter(-1, idx, vals)


class Sampler(torch.nn.Module):
    def forward(self, logits, sampling_metadata, top_k=50):
        flags = runtime_flags(sampling_metadata)
        if flags["inference_mode"]:  # look-alike: inference mode, not grad mode
            logits = logits.contiguous()
        logits = apply_top_k(logits, top_k, flags)
        if flags.get("grad", True):
            probs = logits.softmax(dim=-1, dtype=torch.float32)
        else:
            probs = logits.softmax(dim=-1)
        if flags["grad"] and probs.requires_grad:
            probs.retain_grad()
        if flags["all_greedy"]:
            return probs.argmax(dim=-1)
        return torch.multinomial(probs.float(), 1).squeeze(-1)
