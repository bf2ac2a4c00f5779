import torch
import torch.nn as nn
from torch.utils.checkpoint import checkpoint

from .options import current_options


class StandardTransformerDecoder(nn.Module):

    def __init__(self, layers, layer_norm, layer_drop_p=0.0, checkpoint_layers=False):
        super().__init__()
        self.layers = nn.ModuleList(layers)
        self.layer_norm = layer_norm
        self.layer_drop_p = layer_drop_p
        self.checkpoint_layers = checkpoint_layers

    def _drop_layer(self, opts):
        return opts.build_graph and self.layer_drop_p > 0.0 and bool(torch.rand(1) < self.layer_drop_p)

    def forward(self, seqs, mask=None, state_bag=None):
        opts = current_options(incremental=state_bag is not None)
        for layer in self.layers:
            if self._drop_layer(opts):
                continue
            if opts.build_graph and self.checkpoint_layers:
                seqs = checkpoint(layer, seqs, mask, opts, use_reentrant=False)
            else:
                seqs = layer(seqs, mask, opts)
        return self.layer_norm(seqs)
