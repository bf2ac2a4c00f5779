# Copyright (c) 2024, NVIDIA CORPORATION. All rights reserved.
"""TransformerBlock forward (trimmed)."""
import torch

from megatron.core.transformer.module import MegatronModule
from megatron.core.utils import make_viewless_tensor

from .transformer_layer import LayerForwardState


class TransformerBlock(MegatronModule):

    def forward(self, hidden_states, attention_mask=None, rotary_pos_emb=None, inference_context=None):
        hidden_states = make_viewless_tensor(inp=hidden_states, requires_grad=True, keep_graph=True)
        fwd_state = LayerForwardState(
            grad_enabled=torch.is_grad_enabled(),
            layer_number_offset=self._get_layer_offset(),
            inference_context=inference_context,
        )

        with self.offload_context:
            for l_no, layer in enumerate(self.layers):
                hidden_states = layer(
                    hidden_states,
                    attention_mask=attention_mask,
                    rotary_pos_emb=rotary_pos_emb,
                    fwd_state=fwd_state,
                )

                if (
                    torch.is_grad_enabled()
                    and self.config.cpu_offloading
                    and self.group_prefetch_offload_commit_async is not None
                ):
                    hidden_states = self.group_prefetch_offload_commit_async(hidden_states)

        if self.final_layernorm is not None:
            hidden_states = self.final_layernorm(hidden_states)
            hidden_states = make_viewless_tensor(inp=hidden_states, requires_grad=True, keep_graph=True)
        return hidden_states
