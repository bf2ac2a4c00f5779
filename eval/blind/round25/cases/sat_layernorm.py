# adapted from THUDM/SwissArmyTransformer sat/ops/layernorm.py
import torch
from apex.normalization.fused_layer_norm import FusedLayerNorm


class LayerNorm(FusedLayerNorm):
    def __init__(self, *args, pb_relax=False, **kwargs):
        super().__init__(*args, **kwargs)
        self.pb_relax = pb_relax

    def forward(self, x):
        if torch.is_inference_mode_enabled():
            x = x.clone()
        if self.pb_relax:
            x = x / (x.abs().max().detach() / 8)
        if torch.is_grad_enabled() and x.is_cuda:
            return super().forward(x)
        return torch.nn.functional.layer_norm(x.float(), self.normalized_shape, self.weight.float(),
                                              self.bias.float(), self.eps).to(x.dtype)
