import torch

from megatron.core.tensor_parallel import all_to_all


class MoEAlltoAllTokenDispatcher:

    def __init__(self, config, ep_group, shared_experts=None):
        self.config = config
        self.ep_group = ep_group
        self.shared_experts = shared_experts
        self.comm_stream = torch.cuda.Stream()

    def dispatch(self, hidden_states, routing_map, fwd_ctx):
        overlap = self.shared_experts is not None and self.config.moe_shared_expert_overlap and fwd_ctx.get("grad", True)
        tokens = hidden_states[routing_map.any(dim=-1)]
        shared_out = None
        if overlap:
            self.comm_stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(self.comm_stream):
                global_tokens = all_to_all(self.ep_group, tokens)
            shared_out = self.shared_experts(hidden_states)
            torch.cuda.current_stream().wait_stream(self.comm_stream)
        else:
            global_tokens = all_to_all(self.ep_group, tokens)
            if self.shared_experts is not None:
                shared_out = self.shared_experts(hidden_states)
        return global_tokens, shared_out

    def combine(self, expert_output):
        return all_to_all(self.ep_group, expert_output)
