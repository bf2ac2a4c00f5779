# adapted from aws-neuron/neuronx-distributed src/neuronx_distributed/modules/moe/__init__.py
import torch


def routing_grad_mode():
    return torch.is_grad_enabled()


class RouterTopK(torch.nn.Module):
    def forward(self, hidden_states):
        self.grad_at_routing = torch.is_grad_enabled()
        router_logits = self.linear_router(hidden_states)
        expert_affinities = torch.softmax(router_logits, dim=1, dtype=torch.float32)
        _, expert_index = torch.topk(router_logits, self.top_k)
        return router_logits, expert_affinities, expert_index


class RouterSinkhorn(RouterTopK):
    pass
