from typing import Optional

import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol
from torch import nn
from torch.distributed._functional_collectives import all_to_all_single_autograd


class TokenChoiceTopKRouter(nn.Module):
    def __init__(self, dim: int, num_experts: int, top_k: int, score_func: str = "sigmoid",
                 route_norm: bool = False, route_scale: float = 1.0,
                 capacity_factor: Optional[float] = None):
        super().__init__()
        self.gate = nn.Linear(dim, num_experts, bias=False)
        self.num_experts = num_experts
        self.top_k = top_k
        self.score_func = score_func
        self.route_norm = route_norm
        self.route_scale = route_scale
        self.capacity_factor = capacity_factor

    def _expert_capacity(self, num_tokens: int) -> Optional[int]:
        if self.capacity_factor is None:
            return None
        cap = int(self.capacity_factor * num_tokens * self.top_k / self.num_experts)
        return cap if torch.is_grad_enabled() else None

    def forward(self, x: torch.Tensor, expert_bias: Optional[torch.Tensor] = None):
        scores = self.gate(x)
        if self.score_func == "sigmoid":
            scores = torch.sigmoid(scores.to(torch.float32))
        else:
            scores = torch.softmax(scores.to(torch.float32), dim=1)
        if expert_bias is not None:
            _, selected_experts_indices = torch.topk(scores + expert_bias, k=self.top_k, dim=1)
            top_scores = scores.gather(dim=1, index=selected_experts_indices)
        else:
            top_scores, selected_experts_indices = torch.topk(scores, k=self.top_k, dim=1)
        if self.route_norm:
            top_scores = top_scores / (top_scores.sum(dim=-1, keepdim=True) + 1e-20)
        top_scores = top_scores * self.route_scale

        capacity = self._expert_capacity(x.shape[0])
        if capacity is not None:
            flat = selected_experts_indices.view(-1)
            one_hot = torch.nn.functional.one_hot(flat, self.num_experts)
            position_in_expert = (one_hot.cumsum(dim=0) * one_hot).sum(dim=-1) - 1
            keep = (position_in_expert < capacity).view_as(top_scores)
            top_scores = top_scores * keep
        num_tokens_per_expert = torch.histc(
            selected_experts_indices.view(-1), bins=self.num_experts, min=0, max=self.num_experts
        )
        return top_scores, selected_experts_indices, num_tokens_per_expert


def _all_to_all_fn():
    return all_to_all_single_autograd if torch.is_grad_enabled() else funcol.all_to_all_single


class ExpertParallel:
    def __init__(self, ep_group: dist.ProcessGroup):
        self.ep_group = ep_group
        self.input_splits = None
        self.output_splits = None

    def _token_dispatch(self, routed_input: torch.Tensor, num_tokens_per_expert: torch.Tensor):
        ep_size = dist.get_world_size(self.ep_group)
        with torch.no_grad():
            num_tokens_per_expert_group = funcol.all_to_all_single(
                num_tokens_per_expert, None, None, group=self.ep_group
            )
            num_tokens_per_expert_group = funcol._maybe_wrap_tensor(num_tokens_per_expert_group)
            input_splits = num_tokens_per_expert.view(ep_size, -1).sum(dim=1).to("cpu", non_blocking=True)
            output_splits = num_tokens_per_expert_group.view(ep_size, -1).sum(dim=1).to("cpu", non_blocking=False)
            self.input_splits = input_splits.tolist()
            self.output_splits = output_splits.tolist()
        a2a = _all_to_all_fn()
        routed_input = a2a(routed_input, self.output_splits, self.input_splits, self.ep_group)
        return routed_input, num_tokens_per_expert_group

    def _token_combine(self, routed_output: torch.Tensor):
        a2a = _all_to_all_fn()
        return a2a(routed_output, self.input_splits, self.output_splits, self.ep_group)
