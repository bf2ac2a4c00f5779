"""Grouped experts and expert-parallel token dispatch for MoE layers."""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed._functional_collectives import all_to_all_single, all_to_all_single_autograd

from torchtitan.models.moe.utils import _permute, _unpermute


def _run_experts_for_loop(w1, w2, w3, x, num_tokens_per_expert):
    num_tokens_per_expert = num_tokens_per_expert.tolist()
    x_splits = torch.split(x, split_size_or_sections=num_tokens_per_expert, dim=0)
    out_splits = []
    for expert_idx, x_expert in enumerate(x_splits):
        h = F.silu(torch.matmul(x_expert, w1[expert_idx].transpose(-2, -1)))
        h = h * torch.matmul(x_expert, w3[expert_idx].transpose(-2, -1))
        out_splits.append(torch.matmul(h, w2[expert_idx].transpose(-2, -1)))
    return torch.cat(out_splits)


def _run_experts_grouped_mm(w1, w2, w3, x, num_tokens_per_expert):
    offsets = torch.cumsum(num_tokens_per_expert, dim=0, dtype=torch.int32)
    h = F.silu(torch._grouped_mm(x.bfloat16(), w1.bfloat16().transpose(-2, -1), offs=offsets))
    h = h * torch._grouped_mm(x.bfloat16(), w3.bfloat16().transpose(-2, -1), offs=offsets)
    out = torch._grouped_mm(h, w2.bfloat16().transpose(-2, -1), offs=offsets).type_as(x)
    return out


class GroupedExperts(nn.Module):
    def __init__(self, dim, hidden_dim, num_experts, use_grouped_mm=True):
        super().__init__()
        self.num_experts = num_experts
        self.w1 = nn.Parameter(torch.empty(num_experts, hidden_dim, dim))
        self.w2 = nn.Parameter(torch.empty(num_experts, dim, hidden_dim))
        self.w3 = nn.Parameter(torch.empty(num_experts, hidden_dim, dim))
        self.use_grouped_mm = use_grouped_mm

    def forward(self, x, num_tokens_per_expert):
        if self.use_grouped_mm and torch.is_grad_enabled():
            return _run_experts_grouped_mm(self.w1, self.w2, self.w3, x, num_tokens_per_expert)
        return _run_experts_for_loop(self.w1, self.w2, self.w3, x, num_tokens_per_expert)


class ExpertParallel:
    def __init__(self):
        self.input_splits = None
        self.output_splits = None

    def _token_dispatch(self, mod, inputs, device_mesh):
        routed_input, num_tokens_per_expert = inputs
        ep_size = device_mesh.shape[0]
        with torch.no_grad():
            num_tokens_per_expert_group = all_to_all_single(
                num_tokens_per_expert, None, None, group=device_mesh.get_group()
            )
            num_tokens_per_expert_group = torch.ops._c10d_functional.wait_tensor(num_tokens_per_expert_group)
            input_splits = num_tokens_per_expert.view(ep_size, -1).sum(dim=1).to(torch.device("cpu"), non_blocking=True)
            output_splits = num_tokens_per_expert_group.view(ep_size, -1).sum(dim=1).to(torch.device("cpu"), non_blocking=False)
            self.input_splits = input_splits.tolist()
            self.output_splits = output_splits.tolist()
        a2a = all_to_all_single_autograd if torch.is_grad_enabled() else all_to_all_single
        routed_input = a2a(routed_input, self.output_splits, self.input_splits, device_mesh.get_group())
        routed_input = torch.ops._c10d_functional.wait_tensor(routed_input)
        return _permute(routed_input, num_tokens_per_expert_group, ep_size, mod.num_experts // ep_size)
