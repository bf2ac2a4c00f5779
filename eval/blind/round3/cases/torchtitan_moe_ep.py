# Modelled on torchtitan/models/moe.py and torchtitan/distributed/expert_parallel.py (torchtitan 2025).
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed._functional_collectives import all_to_all_single, all_to_all_single_autograd
from torch.distributed.tensor import DeviceMesh


class TokenChoiceTopKRouter(nn.Module):
    def __init__(self, dim: int, num_experts: int, top_k: int, score_func: str = "sigmoid"):
        super().__init__()
        self.gate = nn.Linear(dim, num_experts, bias=False)
        self.num_experts = num_experts
        self.top_k = top_k
        self.score_func = score_func

    def forward(self, x: torch.Tensor, expert_bias: torch.Tensor | None = None):
        scores = self.gate(x)
        scores = torch.sigmoid(scores.to(torch.float32)) if self.score_func == "sigmoid" else F.softmax(
            scores.to(torch.float32), dim=1)
        if expert_bias is not None:
            _, selected_experts_indices = torch.topk(scores + expert_bias, k=self.top_k, dim=1)
            top_scores = scores.gather(dim=1, index=selected_experts_indices)
        else:
            top_scores, selected_experts_indices = torch.topk(scores, k=self.top_k, dim=1)
        num_tokens_per_expert = torch.histc(selected_experts_indices.view(-1), bins=self.num_experts, min=0,
                                            max=self.num_experts)
        return top_scores, selected_experts_indices, num_tokens_per_expert


class MoE(nn.Module):
    def __init__(self, dim, num_experts, top_k, load_balance_coeff=1e-3):
        super().__init__()
        self.router = TokenChoiceTopKRouter(dim, num_experts, top_k)
        self.load_balance_coeff = load_balance_coeff
        if load_balance_coeff is not None:
            self.register_buffer("expert_bias", torch.zeros(num_experts, dtype=torch.float32), persistent=True)
        else:
            self.expert_bias = None
        self.register_buffer("tokens_per_expert", torch.zeros(num_experts, dtype=torch.float32), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        bs, slen, dim = x.shape
        x = x.view(-1, dim)
        routing_bias = self.expert_bias if torch.is_grad_enabled() else None
        top_scores, selected_experts_indices, num_tokens_per_expert = self.router(x, routing_bias)
        if self.load_balance_coeff is not None and torch.is_grad_enabled():
            with torch.no_grad():
                self.tokens_per_expert.add_(num_tokens_per_expert)
        return top_scores, selected_experts_indices, num_tokens_per_expert


class ExpertParallel:
    def __init__(self):
        self.input_splits = None
        self.output_splits = None

    def _token_dispatch(self, mod, inputs, device_mesh: DeviceMesh):
        routed_input, num_tokens_per_expert = inputs
        ep_size = device_mesh.shape[0]
        with torch.no_grad():
            num_tokens_per_expert_group = all_to_all_single(num_tokens_per_expert, None, None,
                                                            group=device_mesh.get_group())
            num_tokens_per_expert_group = torch.ops._c10d_functional.wait_tensor(num_tokens_per_expert_group)
            input_splits = num_tokens_per_expert.view(ep_size, -1).sum(dim=1).to(torch.device("cpu"), non_blocking=True)
            output_splits = num_tokens_per_expert_group.view(ep_size, -1).sum(dim=1).to(torch.device("cpu"))
            self.input_splits = input_splits.tolist()
            self.output_splits = output_splits.tolist()
        a2a = all_to_all_single_autograd if torch.is_grad_enabled() else all_to_all_single
        routed_input = a2a(routed_input, self.output_splits, self.input_splits, device_mesh.get_group())
        routed_input = torch.ops._c10d_functional.wait_tensor(routed_input)
        return routed_input, num_tokens_per_expert_group
