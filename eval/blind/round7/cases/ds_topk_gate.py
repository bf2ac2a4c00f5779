import math
from typing import Optional, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.nn import Module

from deepspeed import comm as dist
from deepspeed.utils import groups

uniform_map = {}
gumbel_map = {}


def _capacity(gates: Tensor, capacity_factor: Tensor, min_capacity: Tensor) -> Tensor:
    num_tokens = gates.shape[0]
    num_experts = gates.shape[1]
    capacity = torch.ceil((num_tokens / num_experts) * capacity_factor).to(torch.int64)
    if capacity < min_capacity:
        capacity = min_capacity.to(torch.int64)
    return capacity


def _one_hot_to_float(x, num_classes):
    return F.one_hot(x, num_classes=num_classes).float()


def top1gating(logits: Tensor, capacity_factor: float, min_capacity: int, drop_tokens: bool = True,
               ep_group=None, use_rts: bool = True, grad_mode: bool = True) -> Tuple[Tensor, ...]:
    gates = F.softmax(logits, dim=1)
    capacity = _capacity(gates, torch.tensor(capacity_factor), torch.tensor(min_capacity))
    indices1_s = torch.argmax(gates, dim=1)
    num_experts = int(gates.shape[1])
    mask1 = F.one_hot(indices1_s, num_classes=num_experts)
    exp_counts = torch.sum(mask1, dim=0).detach().to("cpu")

    if not drop_tokens and grad_mode:
        new_capacity = torch.max(exp_counts).to(logits.device)
        dist.all_reduce(new_capacity, op=dist.ReduceOp.MAX, group=ep_group or dist.get_world_group())
        capacity = new_capacity
    elif not drop_tokens:
        capacity = torch.max(exp_counts).to(logits.device)

    if grad_mode:
        me = torch.mean(gates, dim=0)
        ce = torch.mean(mask1.float(), dim=0)
        l_aux = torch.sum(me * ce) * num_experts
    else:
        l_aux = logits.new_zeros(())

    if use_rts:
        uniform = uniform_map.get(logits.device)
        if uniform is None:
            uniform = torch.distributions.uniform.Uniform(
                low=torch.tensor(0.0, device=logits.device), high=torch.tensor(1.0, device=logits.device)
            ).rsample
            uniform_map[logits.device] = uniform
        mask1_rand = mask1 * uniform(mask1.shape)
    else:
        mask1_rand = mask1
    top_idx = torch.topk(mask1_rand, k=capacity, dim=0)[1]
    new_mask1 = mask1 * torch.zeros_like(mask1).scatter_(0, top_idx, 1)
    locations1 = torch.cumsum(new_mask1, dim=0) - 1
    locations1_s = torch.sum(locations1 * new_mask1, dim=1)
    gates1_s = (gates * new_mask1).sum(dim=1)
    locations1_sc = _one_hot_to_float(locations1_s, capacity)
    combine_weights = torch.einsum("se,sc->sec", gates1_s.unsqueeze(1) * new_mask1.float(), locations1_sc)
    dispatch_mask = combine_weights.bool()
    return l_aux, combine_weights, dispatch_mask, exp_counts


class TopKGate(Module):
    def __init__(self, model_dim: int, num_experts: int, k: int = 1, capacity_factor: float = 1.0,
                 eval_capacity_factor: float = 1.0, min_capacity: int = 8, noisy_gate_policy=None,
                 drop_tokens: bool = True, use_rts: bool = True, ep_group=None) -> None:
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

    def forward(self, input: torch.Tensor, used_token: Optional[torch.Tensor] = None):
        grad_mode = torch.is_grad_enabled()
        input_fp32 = input.float()
        logits = torch.nn.functional.linear(input_fp32, weight=self.wg.weight.float(), bias=None)
        return top1gating(
            logits,
            self.capacity_factor if grad_mode else self.eval_capacity_factor,
            self.min_capacity,
            self.drop_tokens,
            self.ep_group,
            self.use_rts,
            grad_mode,
        )
