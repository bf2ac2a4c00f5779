import torch

from .config import MoeRunnerConfig
from .runner import fused_experts, select_experts


class FusedMoE(torch.nn.Module):
    def __init__(self, num_experts, top_k, hidden_size, intermediate_size, tp_size=1,
                 reduce_results=True, renormalize=True, inplace=True, routed_scaling_factor=None):
        super().__init__()
        self.top_k = top_k
        self.tp_size = tp_size
        self.reduce_results = reduce_results
        self.renormalize = renormalize
        self.inplace = inplace
        self.routed_scaling_factor = routed_scaling_factor
        self.w13_weight = torch.nn.Parameter(torch.empty(num_experts, 2 * intermediate_size // tp_size, hidden_size))
        self.w2_weight = torch.nn.Parameter(torch.empty(num_experts, hidden_size, intermediate_size // tp_size))

    def forward(self, hidden_states: torch.Tensor, router_logits: torch.Tensor):
        from sglang.srt.distributed import tensor_model_parallel_all_reduce
        cfg = MoeRunnerConfig(
            inplace=self.inplace,
            routed_scaling_factor=self.routed_scaling_factor,
            autograd_possible=not torch.is_inference_mode_enabled(),
        )
        topk_weights, topk_ids = select_experts(router_logits, self.top_k, self.renormalize, cfg)
        final_hidden_states = fused_experts(hidden_states, self.w13_weight, self.w2_weight,
                                            topk_weights, topk_ids, cfg)
        if self.reduce_results and self.tp_size > 1:
            final_hidden_states = tensor_model_parallel_all_reduce(final_hidden_states)
        return final_hidden_states
