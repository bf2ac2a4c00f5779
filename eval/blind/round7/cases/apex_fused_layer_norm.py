import importlib
import numbers

import torch
from torch.nn import init
from torch.nn import functional as F

fused_layer_norm_cuda = None


class FusedRMSNormAffineMixedDtypesFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input, weight, normalized_shape, eps, memory_efficient=False):
        global fused_layer_norm_cuda
        if fused_layer_norm_cuda is None:
            fused_layer_norm_cuda = importlib.import_module("fused_layer_norm_cuda")
        ctx.normalized_shape = normalized_shape
        ctx.eps = eps
        ctx.memory_efficient = memory_efficient
        input_ = input.contiguous()
        weight_ = weight.contiguous()
        output, invvar = fused_layer_norm_cuda.rms_forward_affine_mixed_dtypes(
            input_, ctx.normalized_shape, weight_, ctx.eps
        )
        if ctx.memory_efficient:
            ctx.save_for_backward(output, weight_, invvar)
        else:
            ctx.save_for_backward(input_, weight_, invvar)
        return output


def mixed_dtype_fused_rms_norm_affine(input, weight, normalized_shape, eps=1e-6, memory_efficient=False):
    args = (input, weight, normalized_shape, eps, memory_efficient)
    with torch.amp.autocast("cuda", enabled=False):
        return FusedRMSNormAffineMixedDtypesFunction.apply(*args)


def manual_rms_norm(input, normalized_shape, weight, eps):
    dims = tuple(i for i in range(-1, -len(normalized_shape) - 1, -1))
    variance = input.to(torch.float32).pow(2).mean(dims, keepdim=True)
    input = input * torch.rsqrt(variance + eps)
    if weight is None:
        return input
    if weight.dtype in [torch.float16, torch.bfloat16]:
        input = input.to(weight.dtype)
    return weight * input


class MixedFusedRMSNorm(torch.nn.Module):
    def __init__(self, normalized_shape, eps=1e-5, memory_efficient=False, **kwargs):
        super().__init__()
        if isinstance(normalized_shape, numbers.Integral):
            normalized_shape = (normalized_shape,)
        self.normalized_shape = torch.Size(normalized_shape)
        self.eps = eps
        self.memory_efficient = memory_efficient
        self.weight = torch.nn.Parameter(torch.empty(*normalized_shape))
        init.ones_(self.weight)

    def forward(self, input):
        if torch.jit.is_tracing() or torch.jit.is_scripting() or not input.is_cuda:
            return manual_rms_norm(input, self.normalized_shape, self.weight, self.eps)
        if not torch.is_grad_enabled() and input.dim() == 2:
            return manual_rms_norm(input, self.normalized_shape, self.weight, self.eps)
        memory_efficient = self.memory_efficient and torch.is_grad_enabled()
        return mixed_dtype_fused_rms_norm_affine(
            input, self.weight, self.normalized_shape, self.eps, memory_efficient
        )

    def extra_repr(self):
        return "{normalized_shape}, eps={eps}, memory_efficient={memory_efficient}".format(**self.__dict__)
