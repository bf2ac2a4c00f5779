# adapted from volcengine/verl verl/workers/actor/dp_actor.py
from typing import Tuple

import torch
from torch import nn

from . import BasePPOActor, ulysses
from .torch_functional import entropy_from_logits, logprobs_from_logits


class DataParallelPPOActor(BasePPOActor):
    def __init__(self, config, actor_module: nn.Module, actor_optimizer: torch.optim.Optimizer = None):
        super().__init__(config)
        self.actor_module = actor_module
        self.actor_optimizer = actor_optimizer
        self.use_fused_kernels = self.config.get("use_fused_kernels", False)
        self.ulysses_sequence_parallel_size = self.config.ulysses_sequence_parallel_size
        self.use_ulysses_sp = self.ulysses_sequence_parallel_size > 1

    def _forward_micro_batch(self, micro_batch, temperature, calculate_entropy=False) -> Tuple[torch.Tensor, torch.Tensor]:
        response_length = micro_batch["responses"].size(-1)
        if self.use_ulysses_sp:
            ulysses.configure_overlap(torch.is_grad_enabled())
        with torch.autocast(device_type="cuda", dtype=torch.bfloat16):
            extra_args = {}
            if self.use_fused_kernels and torch.is_grad_enabled():
                extra_args["temperature"] = temperature
                extra_args["return_dict"] = True
            output = self.actor_module(
                input_ids=micro_batch["input_ids"],
                attention_mask=micro_batch["attention_mask"],
                position_ids=micro_batch["position_ids"],
                use_cache=False,
                **extra_args,
            )
            entropy = None
            if extra_args:
                log_probs = output.log_probs[:, -response_length - 1 : -1]
                if calculate_entropy:
                    entropy = output.entropy[:, -response_length - 1 : -1]
            else:
                logits = output.logits
                logits.div_(temperature)
                logits = logits[:, -response_length - 1 : -1, :]
                log_probs = logprobs_from_logits(
                    logits, micro_batch["responses"], inplace_backward=torch.is_grad_enabled(), calculate_entropy=calculate_entropy
                )
                if calculate_entropy:
                    entropy = entropy_from_logits(logits)
            return entropy, log_probs

    def compute_log_prob(self, data, calculate_entropy=False) -> torch.Tensor:
        self.actor_module.eval()
        temperature = data.meta_info["temperature"]
        log_probs_lst = []
        for micro_batch in data.batch.split(data.meta_info["micro_batch_size"]):
            with torch.no_grad():
                _, log_probs = self._forward_micro_batch(micro_batch, temperature=temperature, calculate_entropy=calculate_entropy)
            log_probs_lst.append(log_probs)
        return torch.concat(log_probs_lst, dim=0)

    def update_policy(self, data) -> dict:
        self.actor_module.train()
        metrics = {}
        for micro_batch in data.batch.split(data.meta_info["micro_batch_size"]):
            _, log_probs = self._forward_micro_batch(micro_batch, temperature=data.meta_info["temperature"])
            loss = -(log_probs * micro_batch["advantages"]).mean()
            loss.backward()
            metrics.setdefault("actor/pg_loss", []).append(loss.detach().item())
        self.actor_optimizer.step()
        return metrics
