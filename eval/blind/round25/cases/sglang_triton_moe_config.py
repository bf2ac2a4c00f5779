# adapted from ZunhaiSu/SGLang-FluentLLM python/sglang/srt/layers/moe/gemms/triton_common.py
import os

import torch
from torch import is_grad_enabled

try:
    from triton.tools.tensor_descriptor import TensorDescriptor

    _support_tensor_descriptor = True
except:
    _support_tensor_descriptor = False

padding_size = 128 if bool(int(os.getenv("SGLANG_MOE_PADDING", "0"))) else 0


def get_default_config(M, E, N, K, topk):
    return {"BLOCK_SIZE_M": 64, "BLOCK_SIZE_N": 64, "BLOCK_SIZE_K": 32, "GROUP_SIZE_M": 8,
            "USE_TMA": is_grad_enabled()}


def invoke_fused_moe_kernel(A, B, C, topk_weights, topk_ids, config, compute_type):
    if any(t.requires_grad for t in (A, B)):
        A = A.detach()
    if config["USE_TMA"] and _support_tensor_descriptor:
        a_desc = TensorDescriptor.from_tensor(A, [config["BLOCK_SIZE_M"], config["BLOCK_SIZE_K"]])
        return fused_moe_kernel_tma[(1,)](a_desc, B, C, topk_weights, topk_ids, **config)
    return fused_moe_kernel[(1,)](A, B, C, topk_weights, topk_ids, compute_type=compute_type, **config)


def fused_experts(hidden_states, w1, out, topk_weights, topk_ids, compute_type):
    M, K = hidden_states.shape
    E, N, _ = w1.shape
    config = get_default_config(M, E, N, K, topk_ids.shape[1])
    return invoke_fused_moe_kernel(hidden_states, w1, out, topk_weights, topk_ids, config, compute_type)
