import torch
import torch.nn as nn
import torch.nn.functional as F


def load_balancing_loss_func(router_logits, num_experts, top_k, attention_mask=None):
    if router_logits is None or not isinstance(router_logits, tuple):
        return 0
    compute_device = router_logits[0].device
    concatenated = torch.cat([layer.to(compute_device) for layer in router_logits], dim=0)
    routing_weights = F.softmax(concatenated, dim=-1)
    _, selected_experts = torch.topk(routing_weights, top_k, dim=-1)
    expert_mask = F.one_hot(selected_experts, num_experts)
    tokens_per_expert = torch.mean(expert_mask.float(), dim=0)
    router_prob_per_expert = torch.mean(routing_weights, dim=0)
    return torch.sum(tokens_per_expert * router_prob_per_expert.unsqueeze(0)) * num_experts


class MixtralSparseMoeBlock(nn.Module):

    def __init__(self, config, expert_cls):
        super().__init__()
        self.hidden_dim = config.hidden_size
        self.num_experts = config.num_local_experts
        self.top_k = config.num_experts_per_tok
        self.gate = nn.Linear(self.hidden_dim, self.num_experts, bias=False)
        self.experts = nn.ModuleList([expert_cls(config) for _ in range(self.num_experts)])
        self.jitter_noise = config.router_jitter_noise

    def forward(self, hidden_states, **kwargs):
        is_train = kwargs.pop("is_train", torch.is_grad_enabled())
        batch_size, sequence_length, hidden_dim = hidden_states.shape
        if is_train and self.jitter_noise > 0:
            hidden_states *= torch.empty_like(hidden_states).uniform_(
                1.0 - self.jitter_noise, 1.0 + self.jitter_noise
            )
        hidden_states = hidden_states.view(-1, hidden_dim)
        router_logits = self.gate(hidden_states)
        routing_weights = F.softmax(router_logits, dim=1, dtype=torch.float)
        routing_weights, selected_experts = torch.topk(routing_weights, self.top_k, dim=-1)
        routing_weights /= routing_weights.sum(dim=-1, keepdim=True)
        routing_weights = routing_weights.to(hidden_states.dtype)

        final = torch.zeros((batch_size * sequence_length, hidden_dim),
                            dtype=hidden_states.dtype, device=hidden_states.device)
        expert_mask = F.one_hot(selected_experts, num_classes=self.num_experts).permute(2, 1, 0)
        expert_hit = torch.greater(expert_mask.sum(dim=(-1, -2)), 0).nonzero()
        for expert_idx in expert_hit:
            expert_layer = self.experts[expert_idx]
            idx, top_x = torch.where(expert_mask[expert_idx].squeeze(0))
            current_state = hidden_states[None, top_x].reshape(-1, hidden_dim)
            current_hidden = expert_layer(current_state) * routing_weights[top_x, idx, None]
            final.index_add_(0, top_x, current_hidden.to(hidden_states.dtype))
        final = final.reshape(batch_size, sequence_length, hidden_dim)
        return final, router_logits


class MixtralForCausalLMHead(nn.Module):

    def __init__(self, config, model):
        super().__init__()
        self.model = model
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        self.router_aux_loss_coef = config.router_aux_loss_coef
        self.num_experts = config.num_local_experts
        self.num_experts_per_tok = config.num_experts_per_tok

    def forward(self, input_ids, labels=None, output_router_logits=False):
        hidden_states, all_router_logits = self.model(input_ids, output_router_logits=output_router_logits)
        logits = self.lm_head(hidden_states)
        loss = None
        if labels is not None:
            loss = F.cross_entropy(logits[:, :-1].flatten(0, 1).float(), labels[:, 1:].flatten())
        aux_loss = None
        if output_router_logits and torch.is_grad_enabled():
            aux_loss = load_balancing_loss_func(all_router_logits, self.num_experts, self.num_experts_per_tok)
            if loss is not None:
                loss = loss + self.router_aux_loss_coef * aux_loss.to(loss.device)
        return loss, logits, aux_loss
