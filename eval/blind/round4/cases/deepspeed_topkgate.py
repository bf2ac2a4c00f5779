# Modeled on DeepSpeed deepspeed/moe/sharded_moe.py (TopKGate.forward, top1gating/top2gating
# capacity and noisy-gate policy selection).
from typing import Optional

import torch
import torch.nn.functional as F
from torch.nn import Module


def multiplicative_jitter(x, device, epsilon=1e-2):
    uniform = torch.distributions.uniform.Uniform(
        low=torch.tensor(1.0 - epsilon, device=device), high=torch.tensor(1.0 + epsilon, device=device)
    ).rsample
    return x * uniform(x.shape)


class TopKGate(Module):
    def __init__(self, model_dim, num_experts, k=1, capacity_factor=1.0, eval_capacity_factor=1.0,
                 min_capacity=8, noisy_gate_policy: Optional[str] = None, drop_tokens=True,
                 use_rts=True, ep_group=None, top2_2nd_expert_sampling=True):
        super().__init__()
        self.wg = torch.nn.Linear(model_dim, num_experts, bias=False)
        self.ep_group = ep_group
        self.k = k
        self.capacity_factor = capacity_factor
        self.eval_capacity_factor = eval_capacity_factor
        self.min_capacity = min_capacity
        self.noisy_gate_policy = noisy_gate_policy
        self.drop_tokens = drop_tokens
        self.use_rts = use_rts
        self.top2_2nd_expert_sampling = top2_2nd_expert_sampling

    def forward(self, input: torch.Tensor, used_token: torch.Tensor = None, use_tutel: bool = False):
        from deepspeed.moe.sharded_moe import top1gating, top2gating, topkgating
        training = torch.is_grad_enabled()
        input_fp32 = input.float()
        # input jittering
        if self.noisy_gate_policy == "Jitter" and self.training:
            input_fp32 = multiplicative_jitter(input_fp32, device=input.device)
        logits = F.linear(input_fp32, weight=self.wg.weight.float(), bias=None)
        if self.k == 1:
            gate_output = top1gating(
                logits,
                self.capacity_factor if training else self.eval_capacity_factor,
                self.min_capacity,
                used_token,
                self.noisy_gate_policy if training else None,
                self.drop_tokens,
                self.use_rts,
                self.ep_group,
                use_tutel,
            )
        elif self.k == 2:
            gate_output = top2gating(
                logits,
                self.capacity_factor if self.training else self.eval_capacity_factor,
                self.min_capacity,
                self.drop_tokens,
                self.ep_group,
                self.top2_2nd_expert_sampling,
            )
        else:
            gate_output = topkgating(logits, self.k, self.capacity_factor if self.training else self.eval_capacity_factor,
                                     self.min_capacity, self.drop_tokens, self.ep_group)
        return gate_output
