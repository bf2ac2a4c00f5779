# adapted from pytorch/torchtitan torchtitan/models/moe.py
from dataclasses import dataclass
from typing import Literal

import torch
import torch.nn.functional as F
import torch.utils.checkpoint as checkpoint
from torch import nn
from torch.distributed.tensor import DTensor

from torchtitan.distributed.expert_parallel import indices_padding_wrapper


def _run_experts_grouped_mm(w1, w2, w3, x, num_tokens_per_expert):
    offsets = torch.cumsum(num_tokens_per_expert, dim=0, dtype=torch.int32)
    h = F.silu(torch._grouped_mm(x.bfloat16(), w1.bfloat16().transpose(-2, -1), offs=offsets))
    h = h * torch._grouped_mm(x.bfloat16(), w3.bfloat16().transpose(-2, -1), offs=offsets)
    out = torch._grouped_mm(h, w2.bfloat16().transpose(-2, -1), offs=offsets).type_as(x)
    return out


class GroupedExperts(nn.Module):
    def __init__(self, dim: int, hidden_dim: int, num_experts: int, use_grouped_mm: bool,
                 checkpoint_experts: bool = False):
        super().__init__()
        self.num_experts = num_experts
        self.w1 = nn.Parameter(torch.empty(num_experts, hidden_dim, dim))
        self.w2 = nn.Parameter(torch.empty(num_experts, dim, hidden_dim))
        self.w3 = nn.Parameter(torch.empty(num_experts, hidden_dim, dim))
        self.use_grouped_mm = use_grouped_mm
        self.checkpoint_experts = checkpoint_experts

    def forward(self, x: torch.Tensor, num_tokens_per_expert: torch.Tensor) -> torch.Tensor:
        if isinstance(self.w1, DTensor):
            w1, w2, w3 = self.w1.to_local(), self.w2.to_local(), self.w3.to_local()
        else:
            w1, w2, w3 = self.w1, self.w2, self.w3

        if not isinstance(self.w1, DTensor) or "ep" not in self.w1.device_mesh.mesh_dim_names:
            run_experts_fn = indices_padding_wrapper(_run_experts_grouped_mm)
        else:
            run_experts_fn = _run_experts_grouped_mm
        # recompute the expert MLPs in backward instead of stashing the
        # (tokens, hidden_dim) intermediates
        if torch.is_grad_enabled() and self.checkpoint_experts:
            return checkpoint.checkpoint(
                run_experts_fn, w1, w2, w3, x, num_tokens_per_expert, use_reentrant=False
            )
        return run_experts_fn(w1, w2, w3, x, num_tokens_per_expert)


class TokenChoiceTopKRouter(nn.Module):
    def __init__(self, dim: int, num_experts: int, top_k: int,
                 score_func: Literal["softmax", "sigmoid"], route_norm: bool, route_scale: float):
        super().__init__()
        self.gate = nn.Linear(dim, num_experts, bias=False)
        self.num_experts = num_experts
        self.top_k = top_k
        self.score_func = score_func
        self.route_norm = route_norm
        self.route_scale = route_scale

    def forward(self, x: torch.Tensor, expert_bias: torch.Tensor | None = None):
        # scores shape (bs*slen, num_experts)
        scores = self.gate(x)

        # By default, sigmoid or softmax is performed in float32 to avoid loss explosion;
        # without a backward there is no loss to explode, so keep the gate dtype.
        match self.score_func, torch.is_grad_enabled():
            case "sigmoid", True:
                scores = torch.sigmoid(scores.to(torch.float32))
            case "sigmoid", False:
                scores = torch.sigmoid(scores)
            case "softmax", _:
                scores = F.softmax(scores.to(torch.float32), dim=1)
            case _:
                raise NotImplementedError(f"Unknown score function {self.score_func}")

        if expert_bias is not None:
            _, selected_experts_indices = torch.topk(scores + expert_bias, k=self.top_k, dim=1)
            top_scores = scores.gather(dim=1, index=selected_experts_indices)
        else:
            top_scores, selected_experts_indices = torch.topk(scores, k=self.top_k, dim=1)

        if self.route_norm:
            denominator = top_scores.sum(dim=-1, keepdim=True) + 1e-20
            top_scores = top_scores / denominator
        top_scores = top_scores * self.route_scale

        num_tokens_per_expert = torch.histc(
            selected_experts_indices.view(-1), bins=self.num_experts, min=0, max=self.num_experts
        )
        return top_scores, selected_experts_indices, num_tokens_per_expert


class TokenReorderer(nn.Module):
    def __init__(self, num_experts: int, top_k: int):
        super().__init__()
        self.num_experts = num_experts
        self.top_k = top_k

    def forward(self, top_scores: torch.Tensor, selected_experts_indices: torch.Tensor):
        num_tokens_per_expert = torch.histc(
            selected_experts_indices.view(-1), bins=self.num_experts, min=0, max=self.num_experts
        )

        # Reorder the token indices to match the order of the experts
        # token_indices_experts_sorted shape (bs*slen*top_k,)
        # stable ordering keeps the permutation reproducible across recompute in backward
        token_indices_experts_sorted = torch.argsort(
            selected_experts_indices.view(-1), stable=torch.is_grad_enabled()
        )

        top_scores_experts_sorted = top_scores.view(-1)[token_indices_experts_sorted]
        token_indices_experts_sorted = token_indices_experts_sorted // self.top_k

        return top_scores_experts_sorted, token_indices_experts_sorted, num_tokens_per_expert
