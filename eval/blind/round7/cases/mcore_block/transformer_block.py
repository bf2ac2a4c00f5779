import torch
from torch import Tensor

from megatron.core import tensor_parallel
from .runtime import current_flags
from .attention import SelfAttention


class TransformerLayer(torch.nn.Module):
    def __init__(self, config, layer_number):
        super().__init__()
        self.config = config
        self.self_attention = SelfAttention(config, layer_number)
        self.hidden_dropout = config.hidden_dropout

    def forward(self, hidden_states: Tensor, attention_mask: Tensor, flags):
        attn_out = self.self_attention(hidden_states, attention_mask, flags)
        out = torch.nn.functional.dropout(attn_out, p=self.hidden_dropout, training=flags.is_train)
        return hidden_states + out


class TransformerBlock(torch.nn.Module):
    def __init__(self, config, num_layers):
        super().__init__()
        self.config = config
        self.layers = torch.nn.ModuleList([TransformerLayer(config, i + 1) for i in range(num_layers)])

    def _checkpointed_forward(self, hidden_states, attention_mask, flags):
        def custom(start, end):
            def custom_forward(hidden_states, attention_mask):
                for layer in self.layers[start:end]:
                    hidden_states = layer(hidden_states, attention_mask, flags)
                return hidden_states
            return custom_forward
        chunk = self.config.recompute_num_layers
        for start in range(0, len(self.layers), chunk):
            hidden_states = tensor_parallel.checkpoint(
                custom(start, start + chunk), self.config.distribute_saved_activations, hidden_states, attention_mask
            )
        return hidden_states

    def forward(self, hidden_states: Tensor, attention_mask: Tensor, inference_context=None):
        flags = current_flags(inference_context)
        if self.config.recompute_granularity == "full" and flags.is_train:
            return self._checkpointed_forward(hidden_states, attention_mask, flags)
        for layer in self.layers:
            hidden_states = layer(hidden_states, attention_mask, flags)
        return hidden_states
