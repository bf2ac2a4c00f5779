# Modelled on TransformerEngine 2.x Linear.forward / _linear_eager (transformer_engine/pytorch/module/linear.py)
from typing import Optional

import torch

from transformer_engine.pytorch.cpu_offload import is_cpu_offload_enabled
from transformer_engine.pytorch.module.base import TransformerEngineBaseModule

from .forward_impl import _linear_forward_impl
from .fwd_args import LinearFwdArgs


class _Linear(torch.autograd.Function):
    @staticmethod
    def forward(ctx, weight, inp, bias, args: LinearFwdArgs):
        out, tensors_to_save = _linear_forward_impl(args)
        if ctx is not None and tensors_to_save is not None:
            ctx.save_for_backward(*tensors_to_save)
            ctx.args = args
        return out

    @staticmethod
    def backward(ctx, grad_output):
        raise NotImplementedError


def _linear_eager(weight, inp, bias, fwd_args: LinearFwdArgs, is_grad_enabled: bool):
    if is_grad_enabled:
        return _Linear.apply(weight, inp, bias, fwd_args)
    return _Linear.forward(None, weight, inp, bias, fwd_args)


class Linear(TransformerEngineBaseModule):
    def forward(self, inp: torch.Tensor, is_first_microbatch: Optional[bool] = None, fp8_output: bool = False):
        is_grad_enabled = torch.is_grad_enabled()
        inp = self.prepare_forward(inp, allow_non_contiguous=isinstance(inp, torch.Tensor))
        try:
            weight_tensor, bias_tensor = self._get_weight_and_bias_tensors()
            input_quantizer, weight_quantizer, output_quantizer, grad_input_quantizer = self._get_quantizers(
                fp8_output, is_grad_enabled
            )
            fwd_args = LinearFwdArgs(
                weight=weight_tensor,
                inp=inp,
                bias=bias_tensor if self.apply_bias else None,
                input_requires_grad=inp.requires_grad,
                weight_requires_grad=weight_tensor.requires_grad,
                bias_requires_grad=bias_tensor is not None and bias_tensor.requires_grad,
                input_quantizer=input_quantizer,
                weight_quantizer=weight_quantizer,
                output_quantizer=output_quantizer,
                grad_input_quantizer=grad_input_quantizer,
                activation_dtype=self.activation_dtype,
                fp8=self.fp8,
                fp8_output=fp8_output,
                parallel_mode=self.parallel_mode,
                tp_group=self.tp_group,
                tp_size=self.tp_size,
                tensor_parallel=self.tp_size > 1,
                sequence_parallel=self.sequence_parallel,
                symmetric_ar_type=self.symmetric_ar_type,
                ub_name=self.ub_name,
                ub_overlap_ag_fprop=self.ub_overlap_ag_fprop,
                ub_overlap_rs_fprop=self.ub_overlap_rs_fprop,
                fsdp_group=self.fsdp_group,
                is_fsdp2=self.is_fsdp2,
                cpu_offloading=is_cpu_offload_enabled(),
                is_grad_enabled=is_grad_enabled,
            )
            use_compiled_op = torch.compiler.is_compiling()
            if use_compiled_op and fwd_args.compile_unsupported_reason() is not None:
                use_compiled_op = False
            if use_compiled_op:
                out = torch.ops.transformer_engine.linear(fwd_args)
            else:
                out = _linear_eager(weight_tensor, inp, bias_tensor, fwd_args, is_grad_enabled)
        finally:
            self.end_forward()
        return out
