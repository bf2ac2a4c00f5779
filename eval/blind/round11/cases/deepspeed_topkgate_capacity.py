# Adapted from deepspeedai/DeepSpeed deepspeed/moe/sharded_moe.py (TopKGate.forward, MOELayer.forward).
from typing import Optional

import torch
from torch import Tensor
from torch.nn import Module

from deepspeed.moe.sharded_moe import _AllToAll, multiplicative_jitter, top1gating, top2gating, topkgating


class TopKGate(Module):
    def __init__(self, model_dim: int, num_experts: int, k: int = 1, capacity_factor: float = 1.0,
                 eval_capacity_factor: float = 1.0, min_capacity: int = 8,
                 noisy_gate_policy: Optional[str] = None, drop_tokens: bool = True, use_rts: bool = True,
                 ep_group=None, top2_2nd_expert_sampling: bool = True) -> None:
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
        input_fp32 = input.float()
        if self.noisy_gate_policy == 'Jitter' and self.training:
            input_fp32 = multiplicative_jitter(input_fp32, device=input.device)
        logits = torch.nn.functional.linear(input_fp32, weight=self.wg.weight.float(), bias=None)

        capacity_factor = self.capacity_factor if torch.is_grad_enabled() else self.eval_capacity_factor
        if self.k == 1:
            gate_output = top1gating(logits, capacity_factor, self.min_capacity, used_token,
                                     self.noisy_gate_policy if self.training else None,
                                     self.drop_tokens, self.use_rts, self.ep_group, use_tutel)
        elif self.k == 2:
            gate_output = top2gating(logits, capacity_factor, self.min_capacity, self.drop_tokens,
                                     self.ep_group, self.top2_2nd_expert_sampling)
        else:
            gate_output = topkgating(logits, self.k, capacity_factor, self.min_capacity,
                                     self.drop_tokens, self.ep_group)
        return gate_output


class MOELayer(Module):
    def __init__(self, gate: Module, experts: Module, ep_group_name, ep_size, num_local_experts: int) -> None:
        super().__init__()
        self.gate = gate
        self.experts = experts
        self.ep_group = None
        self.ep_size = ep_size
        self.num_local_experts = num_local_experts
        self.l_aux = None

    def forward(self, *input: Tensor, **kwargs) -> Tensor:
        d_model = input[0].shape[-1]
        reshaped_input = input[0].reshape(-1, d_model)
        l_aux, combine_weights, dispatch_mask, exp_counts = self.gate(reshaped_input, input[1] if len(input) > 1 else None)
        self.l_aux = l_aux if torch.is_grad_enabled() else None
        self.exp_counts = exp_counts
        dispatched_input = torch.einsum("sec,sm->ecm", dispatch_mask.type_as(input[0]), reshaped_input)
        dispatched_input = _AllToAll.apply(self.ep_group, dispatched_input)
        expert_output = self.experts(dispatched_input.reshape(self.ep_size, self.num_local_experts, -1, d_model))
        expert_output = _AllToAll.apply(self.ep_group, expert_output)
        combined_output = torch.einsum("sec,ecm->sm", combine_weights.type_as(input[0]), expert_output)
        return combined_output.reshape(input[0].shape)
