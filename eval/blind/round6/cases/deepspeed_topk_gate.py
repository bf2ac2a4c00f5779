"""Top-1 / top-2 gating for DeepSpeed mixture-of-experts layers."""
import math
from typing import Optional, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor

uniform_map = {}


def multiplicative_jitter(x: Tensor, device: torch.device, epsilon: float = 1e-2) -> Tensor:
    uniform = uniform_map.get(device)
    if uniform is None:
        uniform = torch.distributions.uniform.Uniform(
            low=torch.tensor(1.0 - epsilon, device=device), high=torch.tensor(1.0 + epsilon, device=device)
        ).rsample
        uniform_map[device] = uniform
    return x * uniform(x.shape)


def _capacity(gates: Tensor, capacity_factor: float, min_capacity: int) -> int:
    num_tokens, num_experts = gates.shape
    capacity = math.ceil((num_tokens / num_experts) * capacity_factor)
    return max(capacity, min_capacity)


def top1gating(logits: Tensor, capacity_factor: float, min_capacity: int, drop_tokens: bool = True):
    gates = F.softmax(logits, dim=1)
    capacity = _capacity(gates, capacity_factor, min_capacity)
    indices1_s = torch.argmax(gates, dim=1)
    num_experts = int(gates.shape[1])
    mask1 = F.one_hot(indices1_s, num_classes=num_experts)
    exp_counts = torch.sum(mask1, dim=0).detach().to("cpu")
    me = torch.mean(gates, dim=0)
    ce = torch.mean(mask1.float(), dim=0)
    l_aux = torch.sum(me * ce) * num_experts
    if drop_tokens:
        locations1 = torch.cumsum(mask1, dim=0) - 1
        mask1 = mask1 * torch.lt(locations1, capacity)
    return l_aux, mask1, exp_counts


class TopKGate(torch.nn.Module):
    def __init__(self, model_dim: int, num_experts: int, k: int = 1, capacity_factor: float = 1.0,
                 eval_capacity_factor: float = 1.0, min_capacity: int = 8,
                 noisy_gate_policy: Optional[str] = None, drop_tokens: bool = True) -> None:
        super().__init__()
        self.wg = torch.nn.Linear(model_dim, num_experts, bias=False).float()
        self.k = k
        self.capacity_factor = capacity_factor
        self.eval_capacity_factor = eval_capacity_factor
        self.min_capacity = min_capacity
        self.noisy_gate_policy = noisy_gate_policy
        self.drop_tokens = drop_tokens
        self.l_aux: Optional[Tensor] = None

    def forward(self, input: torch.Tensor) -> Tuple[Tensor, Tensor, Tensor]:
        input_fp32 = input.float()
        if self.noisy_gate_policy == "Jitter" and torch.is_grad_enabled():
            input_fp32 = multiplicative_jitter(input_fp32, device=input.device)
        logits = torch.nn.functional.linear(input_fp32, weight=self.wg.weight.float(), bias=None)
        factor = self.capacity_factor if torch.is_grad_enabled() else self.eval_capacity_factor
        l_aux, mask, exp_counts = top1gating(logits, factor, self.min_capacity, self.drop_tokens)
        if torch.is_grad_enabled():
            self.l_aux = l_aux
        return l_aux, mask, exp_counts
