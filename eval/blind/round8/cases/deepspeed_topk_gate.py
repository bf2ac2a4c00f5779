import math

import torch
import torch.distributed as dist
import torch.nn.functional as F


def _capacity(gates, capacity_factor, min_capacity):
    num_tokens = gates.shape[0]
    num_experts = gates.shape[1]
    capacity = torch.ceil(torch.tensor(num_tokens / num_experts * capacity_factor)).to(torch.int64)
    return torch.max(capacity, torch.tensor(min_capacity, dtype=torch.int64))


def multiplicative_jitter(x, device, epsilon=1e-2):
    uniform = torch.distributions.uniform.Uniform(
        low=torch.tensor(1.0 - epsilon, device=device), high=torch.tensor(1.0 + epsilon, device=device)
    ).rsample
    return x * uniform(x.shape)


def top1gating(logits, capacity_factor, min_capacity, noisy_gate_policy=None, drop_tokens=True, ep_group=None):
    gates = F.softmax(logits, dim=1)
    capacity = _capacity(gates, torch.tensor(capacity_factor), torch.tensor(min_capacity))
    indices1_s = torch.argmax(logits if noisy_gate_policy != "RSample" else logits + torch.randn_like(logits), dim=1)
    num_experts = int(gates.shape[1])
    mask1 = F.one_hot(indices1_s, num_classes=num_experts)
    exp_counts = torch.sum(mask1, dim=0).detach().to("cpu")
    if not drop_tokens:
        new_capacity = torch.max(exp_counts).to(logits.device)
        if ep_group is not None:
            dist.all_reduce(new_capacity, op=dist.ReduceOp.MAX, group=ep_group)
        capacity = new_capacity
    me = torch.mean(gates, dim=0)
    ce = torch.mean(mask1.float(), dim=0)
    l_aux = torch.sum(me * ce) * num_experts
    locations1 = torch.cumsum(mask1, dim=0) - 1
    mask1 = mask1 * torch.lt(locations1, capacity)
    locations1_s = torch.sum(locations1 * mask1, dim=1)
    gates = gates * mask1
    locations1_sc = F.one_hot(locations1_s, num_classes=int(capacity)).to(gates.dtype)
    combine_weights = torch.einsum("se,sc->sec", gates, locations1_sc)
    return l_aux, combine_weights, combine_weights.bool(), exp_counts


class TopKGate(torch.nn.Module):

    def __init__(self, model_dim, num_experts, k=1, capacity_factor=1.0, eval_capacity_factor=1.0,
                 min_capacity=8, noisy_gate_policy=None, drop_tokens=True, ep_group=None):
        super().__init__()
        self.wg = torch.nn.Linear(model_dim, num_experts, bias=False).float()
        self.ep_group = ep_group
        self.k = k
        self.capacity_factor = capacity_factor
        self.eval_capacity_factor = eval_capacity_factor
        self.min_capacity = min_capacity
        self.noisy_gate_policy = noisy_gate_policy
        self.drop_tokens = drop_tokens

    def forward(self, input, used_token=None):
        input_fp32 = input.float()
        needs_grad = torch.is_grad_enabled()
        if self.noisy_gate_policy == "Jitter" and self.training:
            input_fp32 = multiplicative_jitter(input_fp32, device=input.device)
        logits = torch.nn.functional.linear(input_fp32, weight=self.wg.weight.float(), bias=None)
        drop = self.drop_tokens or not needs_grad
        return top1gating(
            logits,
            self.capacity_factor if needs_grad else self.eval_capacity_factor,
            self.min_capacity,
            self.noisy_gate_policy if self.training else None,
            drop,
            self.ep_group,
        )
