# Modelled on verl/utils/megatron/tensor_parallel.py and verl/models/mcore/model_forward.py (verl v0.4).
import torch

from megatron.core import parallel_state as mpu
from megatron.core.tensor_parallel import gather_from_tensor_model_parallel_region

from verl.utils.megatron.tensor_parallel import vocab_parallel_entropy, vocab_parallel_log_probs_from_logits
from verl.utils.kernel.linear_cross_entropy import linear_cross_entropy

from .config import LogitsForwardConfig


def compute_logprobs_fn(output, labels, cfg: LogitsForwardConfig, output_weight=None, hidden_states=None):
    if cfg.use_fused_kernels and cfg.needs_grad:
        log_probs, entropy = linear_cross_entropy(
            hidden_states, output_weight, labels, cfg.temperature, "none", mpu.get_tensor_model_parallel_group()
        )
        return {"log_probs": log_probs, "entropy": entropy}

    logits = output
    if cfg.needs_grad:
        logits = logits.clone()
    logits.div_(cfg.temperature)

    if cfg.needs_grad or mpu.get_tensor_model_parallel_world_size() == 1:
        log_probs = vocab_parallel_log_probs_from_logits(logits, labels)
    else:
        full_logits = gather_from_tensor_model_parallel_region(logits)
        log_probs = torch.log_softmax(full_logits.float(), dim=-1).gather(-1, labels.unsqueeze(-1)).squeeze(-1)
    ret = {"log_probs": log_probs}
    if cfg.calculate_entropy:
        ret["entropy"] = vocab_parallel_entropy(logits)
    return ret
