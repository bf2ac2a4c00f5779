# adapted from pytorch/torchtitan torchtitan/models/common/moe.py
# Copyright (c) Meta Platforms, Inc. and affiliates.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

from __future__ import annotations

from dataclasses import dataclass

import torch

from torchtitan.models.common.activation import UnaryActivationFn
from torchtitan.models.common.aux_loss import AuxLoss
from torchtitan.models.common.linear import RouterGateLinear
from torchtitan.protocols.module import Module

# Shape suffix legend
# (https://medium.com/@NoamShazeer/shape-suffixes-good-coding-style-f836e72e24fd):
#   T = num tokens, D = model dimension,
#   E = num experts, K = top-k


class TokenChoiceTopKRouter(Module):
    """This class implements token-choice routing. In token-choice top-K routing, each token is
    routed to top K experts based on the router scores.
    """

    @dataclass(kw_only=True, slots=True)
    class Config(Module.Config):
        num_experts: int
        gate: RouterGateLinear.Config
        score_func: UnaryActivationFn.Config
        top_k: int = 1
        route_norm: bool = False
        route_norm_epsilon: float = 1e-20
        route_scale: float = 1.0
        aux_loss: AuxLoss.Config | None = None
        _debug_force_load_balance: bool = False

    def __init__(self, config: Config):
        super().__init__()
        self.gate = config.gate.build()
        self.num_experts = config.num_experts
        self.top_k = config.top_k
        self.score_func = config.score_func.build()
        self.route_norm = config.route_norm
        self.route_norm_epsilon = config.route_norm_epsilon
        self.route_scale = config.route_scale
        self.aux_loss = config.aux_loss.build() if config.aux_loss is not None else None
        self._debug_force_load_balance = config._debug_force_load_balance
        # tokens_per_expert_E will be used to track expert usage and to update the expert bias for load balancing
        self.register_buffer(
            "tokens_per_expert_E",
            torch.zeros(config.num_experts, dtype=torch.float32),
            persistent=False,
        )

    def _debug_force_load_balance_routing(
        self, scores_TE: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Balanced round-robin expert assignment.
        Returns expert IDs and scores with shape ``(T, K)``.
        """
        num_tokens = scores_TE.shape[0]
        # Round-robin indices with exact balance
        topk_expert_ids_TK = (
            torch.arange(
                num_tokens * self.top_k,
                device=scores_TE.device,
                dtype=torch.int64,
            ).reshape(num_tokens, self.top_k)
            % self.num_experts
        )
        topk_scores_TK = scores_TE.gather(dim=-1, index=topk_expert_ids_TK)
        return topk_expert_ids_TK, topk_scores_TK

    def _select_experts(
        self,
        scores_TE: torch.Tensor,
        expert_bias_E: torch.Tensor | None = None,
        **router_kwargs,
    ) -> torch.Tensor:
        use_bias = expert_bias_E is not None and router_kwargs.get("apply_expert_bias", True)
        scores_for_choice_TE = scores_TE + expert_bias_E if use_bias else scores_TE
        return torch.topk(
            scores_for_choice_TE, k=self.top_k, dim=-1, sorted=False
        ).indices

    def forward(
        self,
        x_TD: torch.Tensor,
        expert_bias_E: torch.Tensor | None = None,
        *,
        padding_mask_T: torch.Tensor | None = None,
        **router_kwargs,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """
        Args:
            x_TD: Input ``(T, D)``.
            expert_bias_E: Optional load-balancing bias ``(E,)``.
            padding_mask_T: Boolean ``(T,)`` mask that is true for padding.

        Returns:
            topk_scores_TK: Routing scores ``(T, K)``.
            topk_expert_ids_TK: Expert indices ``(T, K)``.
            routing_map_TE: One-hot boolean routing map ``(T, E)``.
        """
        # RouterGateLinear returns FP32, so configured scoring runs in FP32.
        scores_TE = self.score_func(self.gate(x_TD))

        if padding_mask_T is not None:
            if padding_mask_T.dtype != torch.bool:
                raise ValueError(
                    "padding_mask_T must have dtype bool, "
                    f"got {padding_mask_T.dtype}."
                )
            if padding_mask_T.shape != scores_TE.shape[:-1]:
                raise ValueError(
                    "padding_mask_T must have shape matching the routing-map "
                    f"token axis, got {tuple(padding_mask_T.shape)} for scores "
                    f"{tuple(scores_TE.shape)}."
                )

        router_kwargs.setdefault("apply_expert_bias", torch.is_grad_enabled())
        grad_mode = torch.is_grad_enabled()

        def _normalize(topk_scores_TK: torch.Tensor) -> torch.Tensor:
            if self.route_norm and grad_mode:
                denominator_T1 = (
                    topk_scores_TK.sum(dim=-1, keepdim=True) + self.route_norm_epsilon
                )
                topk_scores_TK = topk_scores_TK / denominator_T1
            return topk_scores_TK * self.route_scale

        if self._debug_force_load_balance:
            topk_expert_ids_TK, topk_scores_TK = self._debug_force_load_balance_routing(
                scores_TE
            )
        else:
            topk_expert_ids_TK = self._select_experts(
                scores_TE,
                expert_bias_E,
                **router_kwargs,
            )
            # The expert bias is only used for routing. The gating value is
            # still derived from the original scores.
            topk_scores_TK = scores_TE.gather(dim=-1, index=topk_expert_ids_TK)

        topk_scores_TK = _normalize(topk_scores_TK)

        # Build a one-hot boolean routing map (T, E) marking the experts each
        # token is routed to.
        routing_map_TE = torch.zeros_like(scores_TE, dtype=torch.bool).scatter_(
            -1,
            topk_expert_ids_TK,
            True,
        )
        masked_routing_map_TE = (
            routing_map_TE
            if padding_mask_T is None
            else routing_map_TE & ~padding_mask_T.unsqueeze(-1)
        )
        if self.training:
            # TODO: Activation Checkpointing has the side effect of double counting tokens_per_expert_E --
            #       first in the forward pass, and then in the backward pass. However, this has no
            #       effect on the expert bias update thanks to the torch.sign() operator.
            with torch.no_grad():
                self.tokens_per_expert_E.add_(masked_routing_map_TE.sum(dim=0))
        if self.aux_loss is not None and any((self.training, torch.is_grad_enabled())):
            # The auxiliary-loss gradient is injected into topk_scores_TK on backward.
            topk_scores_TK = self.aux_loss(
                scores_TE,
                masked_routing_map_TE,
                carrier=topk_scores_TK,
                padding_mask_T=padding_mask_T,
            )
        return (
            topk_scores_TK,
            topk_expert_ids_TK,
            routing_map_TE,
        )


class QuantileBalancedTopKRouter(TokenChoiceTopKRouter):
    """Top-k router that uses a biased Top-(k+1) cutoff during training."""

    def _select_experts(
        self,
        scores_TE: torch.Tensor,
        expert_bias_E: torch.Tensor | None = None,
        padding_mask_T: torch.Tensor | None = None,
        **router_kwargs,
    ) -> torch.Tensor:
        if expert_bias_E is None:
            raise ValueError("Quantile balancing requires an expert bias.")
        if not self.training:
            return super()._select_experts(
                scores_TE,
                expert_bias_E,
                **router_kwargs,
            )

        biased_scores_TE = scores_TE + expert_bias_E
        topk_plus_one_scores, topk_plus_one_expert_ids = torch.topk(
            biased_scores_TE,
            k=self.top_k + 1,
            dim=-1,
            sorted=True,
        )
        self.quantile_balancer.observe(
            scores_TE,
            topk_plus_one_scores[:, self.top_k :],
            expert_bias_E,
            padding_mask_T,
        )
        return topk_plus_one_expert_ids[:, : self.top_k].contiguous()
