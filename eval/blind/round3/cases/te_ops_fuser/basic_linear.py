# Modelled on transformer_engine/pytorch/ops/basic/basic_linear.py (TransformerEngine 2.x).
from typing import Optional

import torch

from transformer_engine.pytorch.distributed import gather_along_first_dim
from transformer_engine.pytorch.fp8 import FP8GlobalStateManager
from transformer_engine.pytorch.ops.op import BasicOperation, OperationContext


class BasicLinear(BasicOperation):
    def __init__(self, in_features, out_features, *, tensor_parallel_mode=None, tensor_parallel_group=None,
                 sequence_parallel=False, userbuffers_options=None, dtype=None):
        super().__init__()
        self.in_features = in_features
        self.out_features = out_features
        self.tensor_parallel_mode = tensor_parallel_mode
        self.tensor_parallel_group = tensor_parallel_group
        self.sequence_parallel = sequence_parallel
        self.userbuffers_options = userbuffers_options
        self.weight = torch.nn.Parameter(torch.empty(out_features, in_features, dtype=dtype))

    def op_forward(self, ctx: OperationContext, input_: torch.Tensor, prev_op_grad_output_quantizer=None,
                   next_op_input_quantizer=None) -> torch.Tensor:
        input_requires_grad = ctx.requires_grad and input_.requires_grad
        weight_requires_grad = ctx.requires_grad and self.weight.requires_grad

        with_quantized_compute = FP8GlobalStateManager.is_fp8_enabled() and ctx.requires_grad
        input_quantizer = self.get_quantizer("forward", 0) if with_quantized_compute else None
        weight_quantizer = self.get_quantizer("forward", 1) if with_quantized_compute else None
        if input_quantizer is not None:
            input_quantizer.set_usage(rowwise=True, columnwise=weight_requires_grad)
        if weight_quantizer is not None:
            weight_quantizer.set_usage(rowwise=True, columnwise=input_requires_grad)

        x_local = input_
        if self.tensor_parallel_mode == "column" and self.sequence_parallel:
            x, x_local = gather_along_first_dim(x_local, self.tensor_parallel_group, quantizer=input_quantizer)
        else:
            x = input_quantizer(x_local) if input_quantizer is not None else x_local
        w = weight_quantizer(self.weight) if weight_quantizer is not None else self.weight
        y = torch.matmul(x, w.t()) if not with_quantized_compute else self._fp8_gemm(x, w)
        if self.tensor_parallel_mode == "row" and not self.sequence_parallel:
            torch.distributed.all_reduce(y, group=self.tensor_parallel_group)

        if ctx.requires_grad:
            ctx.save_for_backward(x_local if weight_requires_grad else None, w if input_requires_grad else None)
            ctx.with_quantized_compute = with_quantized_compute
        return y

    def _fp8_gemm(self, x, w):
        from transformer_engine.pytorch.cpp_extensions import general_gemm

        y, *_ = general_gemm(w, x, out_dtype=torch.bfloat16)
        return y
