import torch
import torch.nn as nn


class LayerDropModuleList(nn.ModuleList):

    def __init__(self, p, modules=None):
        super().__init__(modules)
        self.p = p

    def __iter__(self):
        grad_on = torch.is_grad_enabled()
        dropout_probs = torch.empty(len(self)).uniform_()
        kept = [m for i, m in enumerate(super().__iter__()) if not grad_on or dropout_probs[i] > self.p]
        return iter(kept)


class TransformerEncoder(nn.Module):

    def __init__(self, args, embed_tokens, layers, layer_norm=None):
        super().__init__()
        self.dropout = args.dropout
        self.embed_tokens = embed_tokens
        self.encoder_layerdrop = args.encoder_layerdrop
        if self.encoder_layerdrop > 0.0:
            self.layers = LayerDropModuleList(p=self.encoder_layerdrop)
        else:
            self.layers = nn.ModuleList([])
        self.layers.extend(layers)
        self.layer_norm = layer_norm

    def forward(self, src_tokens, src_lengths=None, return_all_hiddens=False):
        encoder_padding_mask = src_tokens.eq(self.embed_tokens.padding_idx)
        x = self.embed_tokens(src_tokens)
        x = nn.functional.dropout(x, p=self.dropout, training=self.training)
        x = x.transpose(0, 1)
        encoder_states = []
        for layer in self.layers:
            x = layer(x, encoder_padding_mask=encoder_padding_mask if encoder_padding_mask.any() else None)
            if return_all_hiddens:
                encoder_states.append(x)
        if self.layer_norm is not None:
            x = self.layer_norm(x)
        return {
            "encoder_out": [x],
            "encoder_padding_mask": [encoder_padding_mask],
            "encoder_states": encoder_states,
        }
