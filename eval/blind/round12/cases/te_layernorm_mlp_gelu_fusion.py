# adapted from NVIDIA/TransformerEngine transformer_engine/pytorch/module/layernorm_mlp.py
import torch

import transformer_engine_torch as tex
from transformer_engine.pytorch.module.base import get_workspace, _2X_ACC_FPROP
from transformer_engine.pytorch.jit import bias_gelu_fused
from transformer_engine.pytorch.utils import clear_tensor_data
from transformer_engine.pytorch.cpp_extensions import general_gemm


def _act_func(activation: str):
    funcs = {
        "gelu": (tex.gelu, tex.dgelu, tex.dbias_dgelu),
        "relu": (tex.relu, tex.drelu, tex.dbias_drelu),
        "swiglu": (tex.swiglu, tex.dswiglu, None),
    }
    if activation not in funcs:
        raise NotImplementedError("Activation type " + activation + " is not supported!")
    return funcs[activation]


def _fc1_and_activation(
    ln_out_total,
    ln_out_return,
    fc1_weight_final,
    fc1_bias,
    fc2_input_quantizer,
    activation,
    activation_dtype,
    fp8,
    bias_gelu_fusion,
    is_grad_enabled,
):
    activation_func = _act_func(activation)[0]
    gemm_gelu_fusion = False
    if activation != "gelu":
        gemm_gelu_fusion = bias_gelu_fusion = False
    else:
        if fp8:
            assert not bias_gelu_fusion, "Bias gelu fusion is supported only for full precision"
        else:
            gemm_gelu_fusion = True
        if gemm_gelu_fusion and bias_gelu_fusion and is_grad_enabled:
            gemm_gelu_fusion = False

    fc1_outputs = general_gemm(
        fc1_weight_final,
        ln_out_total,
        get_workspace(),
        quantization_params=(fc2_input_quantizer if gemm_gelu_fusion else None),
        out_dtype=activation_dtype,
        bias=(fc1_bias if not bias_gelu_fusion else None),
        gelu=gemm_gelu_fusion,
        accumulate=_2X_ACC_FPROP,
    )
    if not is_grad_enabled and (ln_out_total is not ln_out_return):
        clear_tensor_data(ln_out_total)

    fc1_out_without_bias = None
    if bias_gelu_fusion and not gemm_gelu_fusion:
        fc1_out = None
        fc1_out_without_bias, *_ = fc1_outputs
        act_out = bias_gelu_fused(fc1_out_without_bias, fc1_bias)
    elif gemm_gelu_fusion:
        act_out, _, fc1_out, _ = fc1_outputs
    else:
        fc1_out, *_ = fc1_outputs
        act_out = activation_func(fc1_out, fc2_input_quantizer)

    if not is_grad_enabled:
        clear_tensor_data(fc1_out)
    return act_out, fc1_out, fc1_out_without_bias
