import torch
import torch.nn.functional as F

from torchao.quantization.qat.fake_quantizer import FakeQuantizer
from torchao.quantization.quant_primitives import choose_qparams_affine, quantize_affine, MappingType


class FakeQuantizedLinear(torch.nn.Linear):

    def __init__(self, in_features, out_features, bias=False, activation_config=None,
                 weight_config=None, *args, **kwargs):
        super().__init__(in_features, out_features, bias, *args, **kwargs)
        self.activation_fake_quantizer = FakeQuantizer(activation_config) if activation_config else None
        self.weight_fake_quantizer = FakeQuantizer(weight_config) if weight_config else None

    def forward(self, x):
        if self.activation_fake_quantizer is not None and torch._C.is_grad_enabled():
            x = self.activation_fake_quantizer(x)
        if self.weight_fake_quantizer is not None:
            w = self.weight_fake_quantizer(self.weight)
        else:
            w = self.weight
        return F.linear(x, w, self.bias)


class Int8DynActInt4WeightLinear(torch.nn.Module):

    def __init__(self, in_features, out_features, groupsize=256, precision=torch.float32):
        super().__init__()
        self.in_features = in_features
        self.out_features = out_features
        self.groupsize = groupsize
        self.precision = precision
        self.register_buffer("weight", torch.zeros(out_features, in_features, dtype=torch.int8))
        self.register_buffer("scales", torch.zeros(out_features, in_features // groupsize, dtype=precision))
        self.register_buffer("zeros", torch.zeros(out_features, in_features // groupsize, dtype=precision))

    def _quantize_activation(self, x):
        scale, zero_point = choose_qparams_affine(
            x, MappingType.ASYMMETRIC, (1, x.shape[-1]), torch.int8, eps=torch.finfo(torch.float32).eps
        )
        q = quantize_affine(x, (1, x.shape[-1]), scale, zero_point, torch.int8)
        return (q.to(self.precision) - zero_point) * scale

    def forward(self, x):
        if torch._C.is_grad_enabled() and x.requires_grad:
            raise RuntimeError("Int8DynActInt4WeightLinear does not support backward; convert after training")
        x = self._quantize_activation(x.to(self.precision))
        w = self.weight.to(self.precision).view(self.out_features, -1, self.groupsize)
        w = (w - self.zeros.unsqueeze(-1)) * self.scales.unsqueeze(-1)
        return F.linear(x, w.view(self.out_features, -1))
