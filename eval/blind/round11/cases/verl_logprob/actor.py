# Adapted from volcengine/verl verl/workers/actor/dp_actor.py (DataParallelPPOActor._forward_micro_batch,
# compute_log_prob and update_policy call sites).
import torch

from verl.utils.torch_functional import entropy_from_logits, entropy_from_logits_with_chunking

from .kernels import compute_log_prob_kernel


class DataParallelPPOActor:
    def __init__(self, config, actor_module, actor_optimizer=None):
        self.config = config
        self.actor_module = actor_module
        self.actor_optimizer = actor_optimizer
        self.use_fused_kernels = config.get("use_fused_kernels", False)

    def _forward_micro_batch(self, micro_batch, temperature, calculate_entropy=False):
        input_ids = micro_batch["input_ids"]
        attention_mask = micro_batch["attention_mask"]
        position_ids = micro_batch["position_ids"]
        with torch.autocast(device_type="cuda", dtype=torch.bfloat16):
            output = self.actor_module(input_ids=input_ids, attention_mask=attention_mask,
                                       position_ids=position_ids, use_cache=False)
            hidden_states = output.last_hidden_state
            lm_head_weight = self.actor_module.lm_head.weight
            if self.use_fused_kernels:
                labels = torch.roll(input_ids, shifts=-1, dims=-1)
                log_probs, entropy = compute_log_prob_kernel(
                    hidden_states, lm_head_weight, labels, temperature,
                    **{"grad_enabled": torch.is_grad_enabled()},
                )
            else:
                logits = self.actor_module.lm_head(hidden_states).div_(temperature)
                log_probs = torch.log_softmax(logits.float(), dim=-1).gather(
                    -1, torch.roll(input_ids, -1, -1).unsqueeze(-1)).squeeze(-1)
                entropy = None
                if calculate_entropy:
                    entropy_fn = entropy_from_logits if torch.is_grad_enabled() else entropy_from_logits_with_chunking
                    entropy = entropy_fn(logits)
        return entropy, log_probs

    def compute_log_prob(self, data, calculate_entropy=False):
        self.actor_module.eval()
        with torch.no_grad():
            return self._forward_micro_batch(data, temperature=data["temperature"], calculate_entropy=calculate_entropy)
