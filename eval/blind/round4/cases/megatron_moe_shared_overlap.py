# Modeled on Megatron-LM megatron/core/transformer/moe/moe_layer.py (MoELayer.forward with
# shared experts) and shared_experts.py (SharedExpertMLP.pre_forward_comm / linear_fc1_forward_and_act
# / post_forward_comm on a side stream when moe_shared_expert_overlap is set).
import torch


class MoELayer(torch.nn.Module):
    def __init__(self, config, router, token_dispatcher, experts, shared_experts=None):
        super().__init__()
        self.config = config
        self.router = router
        self.token_dispatcher = token_dispatcher
        self.experts = experts
        self.shared_experts = shared_experts
        self.use_shared_expert = shared_experts is not None
        self.shared_expert_overlap = config.moe_shared_expert_overlap

    def _overlapped_forward(self, hidden_states, probs, routing_map):
        self.shared_experts.pre_forward_comm(hidden_states)
        dispatched_input, tokens_per_expert = self.token_dispatcher.token_permutation(
            hidden_states, probs, routing_map
        )
        self.shared_experts.linear_fc1_forward_and_act()
        expert_output, mlp_bias = self.experts(dispatched_input, tokens_per_expert)
        self.shared_experts.linear_fc2_forward()
        output, mlp_bias = self.token_dispatcher.token_unpermutation(expert_output, mlp_bias)
        self.shared_experts.post_forward_comm()
        return output + self.shared_experts.get_output(), mlp_bias

    def _sequential_forward(self, hidden_states, probs, routing_map):
        dispatched_input, tokens_per_expert = self.token_dispatcher.token_permutation(
            hidden_states, probs, routing_map
        )
        expert_output, mlp_bias = self.experts(dispatched_input, tokens_per_expert)
        output, mlp_bias = self.token_dispatcher.token_unpermutation(expert_output, mlp_bias)
        if self.use_shared_expert:
            output = output + self.shared_experts(hidden_states)
        return output, mlp_bias

    def forward(self, hidden_states: torch.Tensor):
        if self.training and self.config.tensor_model_parallel_size > 1 and not self.config.sequence_parallel:
            raise ValueError("During training, performance may degrade if MoE and tensor parallelism"
                             "are enabled without also enabling sequence parallelism.")
        probs, routing_map = self.router(hidden_states)
        match (self.use_shared_expert and self.shared_expert_overlap, torch.is_grad_enabled()):
            case (True, True):
                return self._overlapped_forward(hidden_states, probs, routing_map)
            case _:
                return self._sequential_forward(hidden_states, probs, routing_map)
