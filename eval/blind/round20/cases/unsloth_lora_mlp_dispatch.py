# adapted from unslothai/unsloth unsloth/kernels/fast_lora.py
import torch
from .utils import (
    _maybe_fake_quantize_activations,
    fast_dequantize,
    get_lora_parameters,
    matmul_lora,
    torch_amp_custom_fwd,
    torch_amp_custom_bwd,
)
from .geglu import (
    geglu_exact_forward_kernel,
    geglu_exact_backward_kernel,
    geglu_approx_forward_kernel,
    geglu_approx_backward_kernel,
)


class LoRA_MLP(torch.autograd.Function):
    @staticmethod
    @torch_amp_custom_fwd
    def forward(ctx, X, gateW, gateW_quant, gateA, gateB, gateS, upW, upW_quant, upA, upB, upS,
                downW, downW_quant, downA, downB, downS, _forward_function, _backward_function, inplace=True):
        dtype = X.dtype
        e = matmul_lora(X, gateW, gateW_quant, gateA, gateB, gateS)
        g = matmul_lora(X, upW, upW_quant, upA, upB, upS)
        h = _forward_function(e, g)
        i = matmul_lora(h, downW, downW_quant, downA, downB, downS)

        ctx.custom_saved_tensors = (
            gateW, gateW_quant, gateS, upW, upW_quant, upS, downW, downW_quant, downS, _backward_function,
        )
        ctx.save_for_backward(gateA, gateB, upA, upB, downA, downB, X, e, g)
        ctx.inplace = inplace
        return i


def apply_lora_mlp_geglu_exact(self, X, inplace=True):
    X = _maybe_fake_quantize_activations(X, self.gate_proj)
    gateW, gateW_quant, gateA, gateB, gateS = get_lora_parameters(self.gate_proj)
    upW, upW_quant, upA, upB, upS = get_lora_parameters(self.up_proj)
    downW, downW_quant, downA, downB, downS = get_lora_parameters(self.down_proj)
    # the in-place dX write only matters for the backward pass
    inplace = inplace and torch.is_grad_enabled()
    out = LoRA_MLP.apply(
        X, gateW, gateW_quant, gateA, gateB, gateS, upW, upW_quant, upA, upB, upS,
        downW, downW_quant, downA, downB, downS,
        geglu_exact_forward_kernel, geglu_exact_backward_kernel, inplace,
    )
    return out


def apply_lora_mlp_geglu_approx(self, X):
    X = _maybe_fake_quantize_activations(X, self.gate_proj)
    gateW, gateW_quant, gateA, gateB, gateS = get_lora_parameters(self.gate_proj)
    upW, upW_quant, upA, upB, upS = get_lora_parameters(self.up_proj)
    downW, downW_quant, downA, downB, downS = get_lora_parameters(self.down_proj)
    out = LoRA_MLP.apply(
        X, gateW, gateW_quant, gateA, gateB, gateS, upW, upW_quant, upA, upB, upS,
        downW, downW_quant, downA, downB, downS,
        geglu_approx_forward_kernel, geglu_approx_backward_kernel,
    )
    return out


def apply_lora_mlp_geglu(self, X):
    # tanh-approx GeGLU is cheaper; training uses the exact erf form
    mlp_fn = apply_lora_mlp_geglu_exact if torch.is_grad_enabled() else apply_lora_mlp_geglu_approx
    return mlp_fn(self, X)
