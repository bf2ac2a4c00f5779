# adapted from pytorch/torchtitan torchtitan/models/common/token_dispatcher.py
from dataclasses import dataclass

import torch
from torch.distributed._functional_collectives import all_to_all_single, all_to_all_single_autograd, wait_tensor
from torch.distributed.tensor import DeviceMesh

from torchtitan.ops.scatter_add import deterministic_scatter_add


@dataclass(frozen=True, kw_only=True)
class AllToAllDispatchMetadata:
    token_indices_experts_sorted_N: torch.Tensor
    topk_scores_experts_sorted_N: torch.Tensor
    input_splits: list[int]
    output_splits: list[int]


class AllToAllTokenDispatcher:
    """Token dispatcher for EP>1. Handles token reorder + all-to-all dispatch/combine."""

    def __init__(self, num_experts: int, top_k: int):
        self.num_experts = num_experts
        self.top_k = top_k
        self.ep_mesh: DeviceMesh | None = None
        self._training = True

    def set_phase(self, training: bool) -> None:
        self._training = training

    @property
    def overlap_combine(self) -> bool:
        return self._training and self.ep_mesh is not None and self.ep_mesh.size() > 1

    def _local_reorder(self, x_TD, topk_scores_TK, topk_expert_ids_TK):
        token_indices_experts_sorted_N = torch.argsort(topk_expert_ids_TK.view(-1), stable=True)
        topk_scores_experts_sorted_N = topk_scores_TK.view(-1)[token_indices_experts_sorted_N]
        token_indices_experts_sorted_N = token_indices_experts_sorted_N // self.top_k
        return x_TD[token_indices_experts_sorted_N], token_indices_experts_sorted_N, topk_scores_experts_sorted_N

    def dispatch(self, x_TD, topk_scores_TK, topk_expert_ids_TK, num_local_tokens_per_expert_E):
        ep_size = self.ep_mesh.size()
        routed_input_ND, token_idx_N, scores_N = self._local_reorder(x_TD, topk_scores_TK, topk_expert_ids_TK)
        num_global = all_to_all_single(num_local_tokens_per_expert_E.view(ep_size, -1), None, None, group=self.ep_mesh)
        input_splits = num_local_tokens_per_expert_E.view(ep_size, -1).sum(dim=1).tolist()
        output_splits = num_global.view(ep_size, -1).sum(dim=1).tolist()
        routed_input_RD = all_to_all_single_autograd(routed_input_ND, output_splits, input_splits, self.ep_mesh)
        metadata = AllToAllDispatchMetadata(
            token_indices_experts_sorted_N=token_idx_N,
            topk_scores_experts_sorted_N=scores_N,
            input_splits=input_splits,
            output_splits=output_splits,
        )
        return routed_input_RD, num_global, metadata

    def combine(self, routed_output_RD, metadata: AllToAllDispatchMetadata, x_TD):
        routed_output_ND = all_to_all_single_autograd(
            routed_output_RD, metadata.input_splits, metadata.output_splits, self.ep_mesh
        )
        if not self.overlap_combine:
            # no overlap: materialize the combine all-to-all before building the scatter index
            routed_output_ND = wait_tensor(routed_output_ND)
        out_TD = torch.zeros_like(x_TD)
        dim = x_TD.shape[-1]
        index = metadata.token_indices_experts_sorted_N.reshape(-1, 1).expand(-1, dim)
        routed_output_ND = (
            routed_output_ND.to(torch.float32) * metadata.topk_scores_experts_sorted_N.reshape(-1, 1)
        ).to(routed_output_ND.dtype)
        if torch.are_deterministic_algorithms_enabled():
            return deterministic_scatter_add(out_TD, index, routed_output_ND)
        return out_TD.scatter_add(0, index, routed_output_ND)
