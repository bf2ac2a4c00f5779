# Modelled on megatron/core/transformer/transformer_block.py (Megatron-LM core_r0.9).
import torch

from megatron.core import tensor_parallel


class TransformerBlock(torch.nn.Module):
    def __init__(self, config, layers, final_layernorm=None):
        super().__init__()
        self.config = config
        self.layers = torch.nn.ModuleList(layers)
        self.final_layernorm = final_layernorm

    def _checkpointed_forward(self, hidden_states, attention_mask, rotary_pos_emb):
        def custom(start, end):
            def custom_forward(hidden_states, attention_mask, rotary_pos_emb):
                for layer in self.layers[start:end]:
                    hidden_states = layer(hidden_states, attention_mask, rotary_pos_emb=rotary_pos_emb)
                return hidden_states
            return custom_forward

        num_layers = len(self.layers)
        chunk = self.config.recompute_num_layers
        for start in range(0, num_layers, chunk):
            hidden_states = tensor_parallel.checkpoint(
                custom(start, start + chunk), self.config.distribute_saved_activations,
                hidden_states, attention_mask, rotary_pos_emb,
            )
        return hidden_states

    def forward(self, hidden_states, attention_mask, rotary_pos_emb=None):
        if self.config.recompute_granularity == "full" and self.training and torch.is_grad_enabled():
            hidden_states = self._checkpointed_forward(hidden_states, attention_mask, rotary_pos_emb)
        else:
            for layer in self.layers:
                hidden_states = layer(hidden_states, attention_mask, rotary_pos_emb=rotary_pos_emb)
        if self.final_layernorm is not None:
            hidden_states = self.final_layernorm(hidden_states)
        return hidden_states
