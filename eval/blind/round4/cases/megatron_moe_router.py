# Modeled on Megatron-LM megatron/core/transformer/moe/router.py (TopKRouter: apply_z_loss,
# apply_load_balancing_loss, apply_input_jitter, expert-bias token counting, routing with
# capacity) and moe_utils.py (MoEAuxLossAutoScaler, topk_softmax_with_capacity).
import torch


class MoEAuxLossAutoScaler(torch.autograd.Function):
    main_loss_backward_scale = torch.tensor(1.0)

    @staticmethod
    def forward(ctx, output, aux_loss):
        ctx.save_for_backward(aux_loss)
        return output

    @staticmethod
    def backward(ctx, grad_output):
        (aux_loss,) = ctx.saved_tensors
        return grad_output, torch.ones_like(aux_loss) * MoEAuxLossAutoScaler.main_loss_backward_scale


def z_loss_func(logits, z_loss_coeff):
    return torch.mean(torch.square(torch.logsumexp(logits, dim=-1))) * z_loss_coeff


class TopKRouter(torch.nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.topk = config.moe_router_topk
        self.num_experts = config.num_moe_experts
        self.weight = torch.nn.Parameter(torch.empty(self.num_experts, config.hidden_size))
        self.input_jitter = None
        self.enable_expert_bias = config.moe_router_enable_expert_bias
        if self.enable_expert_bias:
            self.register_buffer("local_tokens_per_expert", torch.zeros(self.num_experts), persistent=False)
            self.register_buffer("expert_bias", torch.zeros(self.num_experts), persistent=False)

    def apply_z_loss(self, logits):
        if self.config.moe_z_loss_coeff is not None and self.training and torch.is_grad_enabled():
            z_loss = z_loss_func(logits, self.config.moe_z_loss_coeff)
            logits = MoEAuxLossAutoScaler.apply(logits, z_loss)
        return logits

    def apply_load_balancing_loss(self, probs, tokens_per_expert):
        aux_loss = torch.sum(probs.mean(0) * tokens_per_expert) * self.config.moe_aux_loss_coeff
        return MoEAuxLossAutoScaler.apply(probs, aux_loss)

    def apply_input_jitter(self, input: torch.Tensor):
        if self.config.moe_input_jitter_eps is not None and torch.is_grad_enabled():
            eps = self.config.moe_input_jitter_eps
            if self.input_jitter is None:
                self.input_jitter = torch.distributions.uniform.Uniform(
                    torch.tensor(1.0 - eps, device=input.device), torch.tensor(1.0 + eps, device=input.device)
                ).rsample
            return input * self.input_jitter(input.shape)
        return input

    def routing(self, logits: torch.Tensor):
        from megatron.core.transformer.moe.moe_utils import topk_softmax_with_capacity
        logits = logits.view(-1, self.num_experts)
        logits = self.apply_z_loss(logits)
        grad_on = torch.is_grad_enabled()
        probs, routing_map, tokens_per_expert = topk_softmax_with_capacity(
            logits,
            self.topk,
            capacity_factor=self.config.moe_expert_capacity_factor if grad_on else None,
            pad_to_capacity=self.config.moe_pad_expert_input_to_capacity,
            drop_policy=self.config.moe_token_drop_policy,
            expert_bias=self.expert_bias if self.enable_expert_bias else None,
        )
        if self.training and grad_on and self.config.moe_router_load_balancing_type == "aux_loss":
            probs = self.apply_load_balancing_loss(probs, tokens_per_expert)
        if self.enable_expert_bias and grad_on:
            with torch.no_grad():
                self.local_tokens_per_expert += routing_map.sum(dim=0)
        return probs, routing_map

    def forward(self, input: torch.Tensor):
        input = self.apply_input_jitter(input)
        logits = torch.nn.functional.linear(input, self.weight)
        return self.routing(logits)
