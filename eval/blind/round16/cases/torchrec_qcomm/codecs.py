# adapted from pytorch/FBGEMM fbgemm_gpu/fbgemm_gpu/quantize_comm.py
import logging
from typing import Optional

import torch
from torch.autograd.profiler import record_function

from fbgemm_gpu.quantize_utils import bf16_to_fp32, fp16_to_fp32, fp32_to_bf16_with_clamp, fp32_to_fp16_with_clamp
from fbgemm_gpu.split_embedding_configs import SparseType

logger: logging.Logger = logging.getLogger()

ROW_DIM_DEFAULT = 32


class QuantizationContext:
    def __init__(self, row_dim: int = ROW_DIM_DEFAULT) -> None:
        self.row_dim = row_dim
        self.row_dim_quant: int = -1


def _quantize_tensor(input_tensor, comm_precision, ctx=None):
    if comm_precision == SparseType.FP32:
        return input_tensor
    elif comm_precision == SparseType.FP16:
        return fp32_to_fp16_with_clamp(input_tensor)
    elif comm_precision == SparseType.BF16:
        return fp32_to_bf16_with_clamp(input_tensor)
    elif comm_precision == SparseType.INT8:
        row_dim = ctx.row_dim
        input_2d = input_tensor.view((-1, row_dim)) if row_dim > 0 else input_tensor
        input_2d_quant = torch.ops.fbgemm.FloatToFused8BitRowwiseQuantized(input_2d)
        ctx.row_dim_quant = input_2d_quant.shape[1]
        return input_2d_quant.view((-1))
    raise ValueError(f"comm_precision={comm_precision} is not supported")


def _dequantize_tensor(quantized_tensor, comm_precision, ctx=None):
    if comm_precision == SparseType.FP32:
        return quantized_tensor
    elif comm_precision == SparseType.FP16:
        return fp16_to_fp32(quantized_tensor)
    elif comm_precision == SparseType.BF16:
        return bf16_to_fp32(quantized_tensor)
    elif comm_precision == SparseType.INT8:
        quantized_tensor_2d = quantized_tensor.view((-1, ctx.row_dim_quant))
        return torch.ops.fbgemm.Fused8BitRowwiseQuantizedToFloat(quantized_tensor_2d).view(-1)
    raise ValueError(f"comm_precision={comm_precision} is not supported")


class QuantizedCommCodec:
    def __init__(self, comm_precision: SparseType, loss_scale: Optional[float] = None) -> None:
        self._comm_precision = comm_precision
        self._loss_scale = loss_scale

    def encode(self, input_tensor: torch.Tensor, ctx: Optional[QuantizationContext] = None) -> torch.Tensor:
        if self._loss_scale is not None:
            input_tensor = self._loss_scale * input_tensor
        with record_function(f"## encoder {self._comm_precision} {self._loss_scale} ##"):
            return _quantize_tensor(input_tensor, self._comm_precision, ctx)

    def decode(self, input_tensor: torch.Tensor, ctx: Optional[QuantizationContext] = None) -> torch.Tensor:
        if self._loss_scale is not None:
            input_tensor = input_tensor / self._loss_scale
        with record_function(f"## decoder {self._comm_precision} {self._loss_scale} ##"):
            return _dequantize_tensor(input_tensor, self._comm_precision, ctx)

    def create_context(self) -> Optional[QuantizationContext]:
        return QuantizationContext()
