import importlib
import numbers

import torch
import torch.nn.functional as F
from torch.nn import init

fused_layer_norm_cuda = None


class FusedLayerNormAffineFunction(torch.autograd.Function):

    @staticmethod
    def forward(ctx, input, weight, bias, normalized_shape, eps, memory_efficient=False):
        global fused_layer_norm_cuda
        if fused_layer_norm_cuda is None:
            fused_layer_norm_cuda = importlib.import_module("fused_layer_norm_cuda")
        ctx.normalized_shape = normalized_shape
        ctx.eps = eps
        ctx.memory_efficient = memory_efficient
        input_ = input.contiguous()
        weight_ = weight.contiguous()
        bias_ = bias.contiguous()
        output, mean, invvar = fused_layer_norm_cuda.forward_affine(
            input_, ctx.normalized_shape, weight_, bias_, ctx.eps
        )
        if ctx.memory_efficient:
            ctx.save_for_backward(output, weight_, bias_, None, invvar)
        else:
            ctx.save_for_backward(input_, weight_, bias_, mean, invvar)
        return output

    @staticmethod
    def backward(ctx, grad_output):
        raise NotImplementedError


def _forward_affine_no_autograd(input, weight, bias, normalized_shape, eps):
    global fused_layer_norm_cuda
    if fused_layer_norm_cuda is None:
        fused_layer_norm_cuda = importlib.import_module("fused_layer_norm_cuda")
    output, _, _ = fused_layer_norm_cuda.forward_affine(
        input.contiguous(), normalized_shape, weight.contiguous(), bias.contiguous(), eps
    )
    return output


def fused_layer_norm_affine(input, weight, bias, normalized_shape, eps=1e-6, memory_efficient=False):
    args = (input, weight, bias, normalized_shape, eps, memory_efficient)
    with torch.autocast(device_type="cuda", enabled=False):
        if torch.is_grad_enabled():
            return FusedLayerNormAffineFunction.apply(*args)
        return _forward_affine_no_autograd(*args[:5])


class FusedLayerNorm(torch.nn.Module):

    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True, memory_efficient=False):
        super().__init__()
        if isinstance(normalized_shape, numbers.Integral):
            normalized_shape = (normalized_shape,)
        self.normalized_shape = torch.Size(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        self.memory_efficient = memory_efficient
        if self.elementwise_affine:
            self.weight = torch.nn.Parameter(torch.empty(*normalized_shape))
            self.bias = torch.nn.Parameter(torch.empty(*normalized_shape))
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        if self.elementwise_affine:
            init.ones_(self.weight)
            init.zeros_(self.bias)

    def forward(self, input):
        if torch.jit.is_tracing() or torch.jit.is_scripting() or not input.is_cuda:
            return F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)
        if not torch.is_grad_enabled() and input.numel() < (1 << 16):
            return F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)
        return fused_layer_norm_affine(input, self.weight, self.bias, self.normalized_shape,
                                       self.eps, self.memory_efficient)
