# Modelled on transformer_engine/pytorch/module/linear.py (TransformerEngine 2.1-2.4).
from typing import Optional, Union

import torch

import transformer_engine_torch as tex
from transformer_engine.pytorch.cpp_extensions import general_gemm
from transformer_engine.pytorch.distributed import gather_along_first_dim, reduce_scatter_along_first_dim
from transformer_engine.pytorch.module.base import TransformerEngineBaseModule, get_ub
from transformer_engine.pytorch.utils import clear_tensor_data


class _Linear(torch.autograd.Function):
    @staticmethod
    def forward(ctx, weight, inp, bias, is_first_microbatch, fp8, fp8_calibration, input_quantizer,
                weight_quantizer, output_quantizer, fuse_wgrad_accumulation, cpu_offloading, tp_group,
                tp_size, sequence_parallel, tensor_parallel, activation_dtype, parallel_mode,
                is_grad_enabled, ub_overlap_rs_fprop, ub_overlap_ag_dgrad, ub_overlap_ag_fprop,
                ub_overlap_rs_dgrad, ub_bulk_dgrad, ub_bulk_wgrad, ub_name, module, skip_fp8_weight_update):
        out_features, in_features = weight.shape
        inputmat = inp.view(-1, in_features)
        backward_needs_input = is_grad_enabled and weight.requires_grad

        ub_overlap_ag_fprop = ub_overlap_ag_fprop and is_grad_enabled
        ub_obj = None
        ub_type = None
        if ub_overlap_rs_fprop:
            ub_obj = get_ub(ub_name + "_fprop")
            ub_type = tex.CommOverlapType.RS
        elif ub_overlap_ag_fprop:
            ub_obj = get_ub(ub_name + "_fprop")
            ub_type = tex.CommOverlapType.AG

        with_input_all_gather_nccl = parallel_mode == "column" and sequence_parallel and not ub_overlap_ag_fprop
        if fp8:
            input_quantizer.set_usage(rowwise=True, columnwise=backward_needs_input)
        if with_input_all_gather_nccl:
            inputmat_total, _ = gather_along_first_dim(inputmat, tp_group, quantizer=input_quantizer)
        elif ub_overlap_ag_fprop:
            ub_obj.copy_into_buffer(inputmat, input_quantizer, local_chunk=True)
            inputmat_total = ub_obj.get_buffer(input_quantizer)
        else:
            inputmat_total = inputmat

        if fp8 and weight_quantizer is not None:
            columnwise_usage = is_grad_enabled and inp.requires_grad
            weight_quantizer.set_usage(rowwise=True, columnwise=columnwise_usage)

        gemm_out, *_, reduce_scatter_out = general_gemm(
            weight, inputmat_total, out_dtype=activation_dtype, bias=bias, ub=ub_obj, ub_type=ub_type,
        )
        if ub_overlap_rs_fprop:
            out = reduce_scatter_out
        elif parallel_mode == "row" and sequence_parallel:
            out, _ = reduce_scatter_along_first_dim(gemm_out, tp_group)
        elif parallel_mode == "row" and tensor_parallel:
            torch.distributed.all_reduce(gemm_out, group=tp_group)
            out = gemm_out
        else:
            out = gemm_out

        if is_grad_enabled:
            saved_inputmat = inputmat if backward_needs_input else None
            ctx.save_for_backward(saved_inputmat, weight, bias)
            ctx.activation_dtype = activation_dtype
            ctx.ub_name = ub_name
        else:
            clear_tensor_data(inputmat_total if inputmat_total is not inputmat else None)
        return out.view(-1, *inp.shape[1:-1], out_features)


class Linear(TransformerEngineBaseModule):
    def forward(self, inp: torch.Tensor, is_first_microbatch: Optional[bool] = None,
                fp8_output: Optional[bool] = False) -> Union[torch.Tensor, tuple]:
        skip_fp8_weight_update = None
        with self.prepare_forward(inp, allow_non_contiguous=isinstance(inp, torch.Tensor)) as inp:
            weight_tensor, bias_tensor = self._get_weight_and_bias_tensors()
            quantizers = self._get_quantizers(fp8_output)

            if torch.is_grad_enabled():
                linear_fn = _Linear.apply
                args = []
            else:
                linear_fn = _Linear.forward
                args = [None]
            args += (
                weight_tensor, inp, bias_tensor if self.apply_bias else None, is_first_microbatch,
                self.fp8, self.fp8_calibration, *quantizers, self.fuse_wgrad_accumulation, False,
                self.tp_group, self.tp_size, self.sequence_parallel, self.tp_size > 1,
                self.activation_dtype, self.parallel_mode, torch.is_grad_enabled(),
                self.ub_overlap_rs_fprop, self.ub_overlap_ag_dgrad, self.ub_overlap_ag_fprop,
                self.ub_overlap_rs_dgrad, self.ub_bulk_dgrad, self.ub_bulk_wgrad, self.ub_name, self,
                skip_fp8_weight_update,
            )
            out = linear_fn(*args)
        return out
