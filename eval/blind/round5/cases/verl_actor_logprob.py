"""Modelled on verl verl/workers/actor/dp_actor.py (DataParallelPPOActor._forward_micro_batch,
compute_log_prob, update_policy)."""
import torch
from torch import nn

from verl.utils.torch_functional import entropy_from_logits, logprobs_from_logits
from verl.utils.ulysses import gather_outpus_and_unpad, ulysses_pad_and_slice_inputs


class DataParallelPPOActor:
    def __init__(self, config, actor_module: nn.Module, actor_optimizer=None):
        self.config = config
        self.actor_module = actor_module
        self.actor_optimizer = actor_optimizer
        self.use_remove_padding = config.get("use_remove_padding", False)
        self.use_fused_kernels = config.get("use_fused_kernels", False)
        self.ulysses_sequence_parallel_size = config.ulysses_sequence_parallel_size
        self.use_ulysses_sp = self.ulysses_sequence_parallel_size > 1

    def _forward_micro_batch(self, micro_batch, temperature, calculate_entropy=False):
        input_ids = micro_batch["input_ids"]
        attention_mask = micro_batch["attention_mask"]
        position_ids = micro_batch["position_ids"]
        response_length = micro_batch["responses"].size(-1)

        # fused logprob kernel has no backward: allowed for rollout-side recomputation only
        use_fused = self.use_fused_kernels and not torch.is_grad_enabled()

        with torch.autocast(device_type="cuda", dtype=torch.bfloat16):
            output = self.actor_module(
                input_ids=input_ids,
                attention_mask=attention_mask,
                position_ids=position_ids,
                use_cache=False,
                return_dict=True,
                temperature=temperature if use_fused else None,
            )
            if use_fused:
                log_probs = output.log_probs[:, -response_length - 1: -1]
                entropy = output.entropy[:, -response_length - 1: -1] if calculate_entropy else None
                return entropy, log_probs

            logits = output.logits
            # keep the policy-gradient path in fp32; old_log_prob can stay bf16
            if torch.is_grad_enabled():
                logits = logits.float()
            logits.div_(temperature)
            logits = logits[:, -response_length - 1: -1, :]
            log_probs = logprobs_from_logits(logits, micro_batch["responses"])
            entropy = entropy_from_logits(logits) if calculate_entropy else None
        return entropy, log_probs

    @torch.no_grad()
    def compute_log_prob(self, data, calculate_entropy=False):
        self.actor_module.eval()
        log_probs_lst = []
        for micro_batch in data.split(self.config.log_prob_micro_batch_size_per_gpu):
            _, log_probs = self._forward_micro_batch(micro_batch, temperature=data.meta_info["temperature"])
            log_probs_lst.append(log_probs)
        return torch.concat(log_probs_lst, dim=0)

    def update_policy(self, data):
        self.actor_module.train()
        for micro_batch in data.split(self.config.ppo_micro_batch_size_per_gpu):
            entropy, log_prob = self._forward_micro_batch(micro_batch, temperature=data.meta_info["temperature"])
            ratio = torch.exp(log_prob - micro_batch["old_log_probs"])
            loss = -(ratio * micro_batch["advantages"]).mean()
            loss.backward()
