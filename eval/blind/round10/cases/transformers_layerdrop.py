# Adapted from huggingface/transformers src/transformers/models/wav2vec2/modeling_wav2vec2.py
# (Wav2Vec2Encoder.forward: layerdrop + gradient checkpointing)
import torch
import torch.nn as nn
from torch.utils.checkpoint import checkpoint


class Wav2Vec2Encoder(nn.Module):
    def __init__(self, layers, layerdrop=0.1):
        super().__init__()
        self.layers = nn.ModuleList(layers)
        self.layerdrop = layerdrop
        self.gradient_checkpointing = False
        self.layer_norm = nn.LayerNorm(768)

    def forward(self, hidden_states, attention_mask=None):
        all_hidden = ()
        for layer in self.layers:
            all_hidden = all_hidden + (hidden_states,)
            dropout_probability = torch.rand([])
            if (g := torch.is_grad_enabled()) and dropout_probability < self.layerdrop:
                continue
            if self.gradient_checkpointing and g:
                hidden_states = checkpoint(layer, hidden_states, attention_mask, use_reentrant=False)
            else:
                hidden_states = layer(hidden_states, attention_mask)
        hidden_states = self.layer_norm(hidden_states)
        return hidden_states, all_hidden
