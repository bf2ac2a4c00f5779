# Modelled on TransformerEngine 2.x transformer_engine/pytorch/module/layernorm_mlp.py
from typing import Tuple, Union

import torch

import transformer_engine_torch as tex
from transformer_engine.pytorch.distributed import (
    gather_along_first_dim,
    reduce_scatter_along_first_dim,
)
from transformer_engine.pytorch.module.base import (
    TransformerEngineBaseModule,
    fill_userbuffers_buffer_for_all_gather,
    get_ub,
)
from transformer_engine.pytorch.cpp_extensions import general_gemm
from transformer_engine.pytorch.utils import _get_cuda_rng_state


class _LayerNormMLP(torch.autograd.Function):
    """LayerNormMLP semi-top level module"""

    @staticmethod
    def forward(
        ctx,
        inp: torch.Tensor,
        ln_weight: torch.Tensor,
        ln_bias: Union[torch.Tensor, None],
        fc1_weight: torch.Tensor,
        fc2_weight: torch.Tensor,
        non_tensor_args: Tuple,
    ) -> Tuple[torch.Tensor, ...]:
        (
            eps,
            fp8,
            fc1_input_quantizer,
            fc1_weight_quantizer,
            fc2_weight_quantizer,
            tp_group,
            tp_size,
            sequence_parallel,
            return_layernorm_output_gathered,
            is_grad_enabled,
            ub_overlap_ag,
            ub_overlap_rs,
            ub_name,
            checkpoint,
            is_fsdp2,
            recompute_for_bwd,
        ) = non_tensor_args

        if is_grad_enabled and not recompute_for_bwd:
            ctx.checkpoint = checkpoint
            if checkpoint:
                ctx.cpu_rng_state = torch.get_rng_state()
                ctx.cuda_rng_state = _get_cuda_rng_state()

        save_for_checkpoint = checkpoint and is_grad_enabled and not recompute_for_bwd

        # Configure Userbuffers communication (comm+GEMM overlap)
        ub_overlap_ag = ub_overlap_ag and is_grad_enabled and not return_layernorm_output_gathered
        ub_overlap_rs = ub_overlap_rs and is_grad_enabled

        inputmat = inp.view((-1, inp.shape[-1]))
        ln_out, mu, rsigma = tex.layernorm_fwd(inputmat, ln_weight, ln_bias, eps, None, None)

        if fp8 and fc1_weight_quantizer is not None:
            fc1_weight_quantizer.set_usage(
                rowwise=True,
                columnwise=is_grad_enabled and not is_fsdp2,
            )
        if fp8 and fc2_weight_quantizer is not None:
            fc2_weight_quantizer.set_usage(rowwise=True, columnwise=is_grad_enabled)

        # FC1 input all-gather (sequence parallel)
        if sequence_parallel:
            if ub_overlap_ag:
                ub_obj_lnout = get_ub("fc1_fprop", fp8)
                ln_out_total, _ = fill_userbuffers_buffer_for_all_gather(
                    ub_obj_lnout, ln_out, fc1_input_quantizer, tp_group
                )
            else:
                ub_obj_lnout = None
                ln_out_total, _ = gather_along_first_dim(ln_out, tp_group)
        else:
            ub_obj_lnout = None
            ln_out_total = ln_out

        fc1_out, *_ = general_gemm(
            fc1_weight,
            ln_out_total,
            ub=ub_obj_lnout,
            ub_type=tex.CommOverlapType.AG if ub_overlap_ag else None,
        )
        act_out = torch.nn.functional.gelu(fc1_out, approximate="tanh")

        # FC2 GEMM + reduce-scatter
        if ub_overlap_rs:
            ub_obj_fc2out = get_ub("fc2_fprop", fp8)
            rs_out = torch.empty(
                (act_out.shape[0] // tp_size, fc2_weight.shape[0]),
                dtype=act_out.dtype,
                device=act_out.device,
            )
            _, *_, rs_out = general_gemm(
                fc2_weight,
                act_out,
                ub=ub_obj_fc2out,
                ub_type=tex.CommOverlapType.RS,
                extra_output=rs_out,
            )
            fc2_out = rs_out
        else:
            fc2_out, *_ = general_gemm(fc2_weight, act_out)
            if sequence_parallel:
                fc2_out, _ = reduce_scatter_along_first_dim(fc2_out, tp_group)
            elif tp_size > 1:
                torch.distributed.all_reduce(fc2_out, group=tp_group)

        if save_for_checkpoint:
            ctx.save_for_backward(inp, ln_weight, ln_bias, fc1_weight, fc2_weight)
        elif is_grad_enabled:
            ctx.save_for_backward(inputmat, ln_weight, ln_out, fc1_weight, fc1_out, act_out, fc2_weight, mu, rsigma)
            ctx.ub_name = ub_name

        return fc2_out.view(-1, *inp.shape[1:-1], fc2_out.shape[-1])


class LayerNormMLP(TransformerEngineBaseModule):
    def forward(self, inp: torch.Tensor, is_first_microbatch=None):
        is_grad_enabled = torch.is_grad_enabled()
        inp = self.prepare_forward(inp)
        try:
            if is_grad_enabled:
                fwd_fn = _LayerNormMLP.apply
                autograd_ctx = []
            else:
                fwd_fn = _LayerNormMLP.forward
                autograd_ctx = [None]
            non_tensor_args = (
                self.eps,
                self.fp8,
                self.quantizers["fc1_input"],
                self.quantizers["fc1_weight"],
                self.quantizers["fc2_weight"],
                self.tp_group,
                self.tp_size,
                self.sequence_parallel,
                self.return_layernorm_output_gathered,
                is_grad_enabled,
                self.ub_overlap_ag,
                self.ub_overlap_rs,
                self.ub_name,
                self.checkpoint,
                self.is_fsdp2,
                False,
            )
            out = fwd_fn(
                *autograd_ctx,
                inp,
                self.layer_norm_weight,
                self.layer_norm_bias,
                self.fc1_weight,
                self.fc2_weight,
                non_tensor_args,
            )
        finally:
            self.end_forward()
        return out
