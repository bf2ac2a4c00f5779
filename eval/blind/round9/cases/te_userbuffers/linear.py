from typing import Optional

import torch

import transformer_engine_torch as tex

from .base import TransformerEngineBaseModule, get_ub
from .distributed import allreduce, reduce_scatter_along_first_dim


class _Linear(torch.autograd.Function):
    @staticmethod
    def forward(
        ctx,
        weight: torch.Tensor,
        inp: torch.Tensor,
        bias: Optional[torch.Tensor],
        input_quantizer,
        weight_quantizer,
        tp_group,
        tp_size: int,
        sequence_parallel: bool,
        parallel_mode: Optional[str],
        ub_overlap_rs_fprop: bool,
        ub_name: str,
        is_grad_enabled: bool,
    ) -> torch.Tensor:
        inputmat = inp.view(-1, inp.shape[-1])
        if input_quantizer is not None:
            inputmat = input_quantizer(inputmat)
        weightmat = weight_quantizer(weight) if weight_quantizer is not None else weight

        ub_obj = None
        ub_type = None
        rs_out = None
        if ub_overlap_rs_fprop:
            ub_obj = get_ub(ub_name + "_fprop")
            ub_type = tex.CommOverlapType.RS
            out_shape = [inputmat.shape[0] // tp_size, weight.shape[0]]
            rs_out = torch.empty(out_shape, dtype=inp.dtype, device=inp.device)

        out, *_ = tex.generic_gemm(
            weightmat, True, inputmat, False, None,
            bias=bias, ub=ub_obj, ub_type=ub_type, extra_output=rs_out,
        )

        if ub_obj is not None:
            out = rs_out
        elif parallel_mode == "row" and sequence_parallel:
            out, _ = reduce_scatter_along_first_dim(out, tp_group)
        elif parallel_mode == "row" and tp_size > 1:
            out, _ = allreduce(out, tp_group)

        if is_grad_enabled:
            ctx.save_for_backward(inputmat, weightmat)
            ctx.tp_group = tp_group
            ctx.sequence_parallel = sequence_parallel
            ctx.parallel_mode = parallel_mode
            ctx.ub_name = ub_name
        return out.view(-1, *inp.shape[1:-1], out.shape[-1])


class Linear(TransformerEngineBaseModule):
    def __init__(self, in_features: int, out_features: int, bias: bool = True,
                 tp_group=None, tp_size: int = 1, sequence_parallel: bool = False,
                 parallel_mode: Optional[str] = None, ub_overlap_rs: bool = False,
                 ub_name: Optional[str] = None, params_dtype: Optional[torch.dtype] = None) -> None:
        super().__init__()
        params_dtype = params_dtype or torch.get_default_dtype()
        self.tp_group = tp_group
        self.tp_size = tp_size
        self.sequence_parallel = sequence_parallel
        self.parallel_mode = parallel_mode
        self.ub_overlap_rs_fprop = ub_overlap_rs and parallel_mode == "row" and sequence_parallel
        self.ub_name = ub_name
        in_local = in_features // tp_size if parallel_mode == "row" else in_features
        out_local = out_features // tp_size if parallel_mode == "column" else out_features
        self.weight = torch.nn.Parameter(torch.empty(out_local, in_local, dtype=params_dtype))
        self.bias = torch.nn.Parameter(torch.zeros(out_local, dtype=params_dtype)) if bias else None
        self.quantizers = {"input": None, "weight": None}

    def _get_quantizers(self, requires_dgrad: bool):
        input_quantizer = self.quantizers["input"]
        weight_quantizer = self.quantizers["weight"]
        if weight_quantizer is not None:
            weight_quantizer.set_usage(rowwise=True, columnwise=requires_dgrad)
        return input_quantizer, weight_quantizer

    def forward(self, inp: torch.Tensor) -> torch.Tensor:
        with self.prepare_forward(inp) as inp:
            input_quantizer, weight_quantizer = self._get_quantizers(
                requires_dgrad=self._is_grad_enabled and inp.requires_grad
            )
            ub_overlap_rs_fprop = self.ub_overlap_rs_fprop and self._is_grad_enabled
            out = _Linear.apply(
                self.weight,
                inp,
                self.bias,
                input_quantizer,
                weight_quantizer,
                self.tp_group,
                self.tp_size,
                self.sequence_parallel,
                self.parallel_mode,
                ub_overlap_rs_fprop,
                self.ub_name,
                self._is_grad_enabled,
            )
        return out
