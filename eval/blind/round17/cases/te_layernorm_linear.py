# adapted from NVIDIA/TransformerEngine transformer_engine/pytorch/module/layernorm_linear.py
from typing import Optional, Tuple, Union

import torch

from .base import TransformerEngineBaseModule, get_ub
from ._common import _noop_cat
from ..distributed import gather_along_first_dim, in_fp8_graph_capture_mode
from ..cpp_extensions import fp8_gemm, gemm, layernorm_fwd_fp8


class _LayerNormLinear(torch.autograd.Function):
    """LayerNormLinear semi-top level module
    Calls custom cuda extensions.
    """

    @staticmethod
    def forward(
        ctx,
        inp: torch.Tensor,
        ln_weight: torch.Tensor,
        ln_bias: torch.Tensor,
        weight: torch.Tensor,
        bias: torch.Tensor,
        use_bias: bool,
        eps: float,
        fp8: bool,
        fp8_calibration: bool,
        fp8_meta: dict,
        tp_group,
        tp_size: int,
        sequence_parallel: bool,
        return_layernorm_output: bool,
        is_grad_enabled: bool,
        ub_split_ag: bool,
        ub_name: str,
    ) -> Union[Tuple[torch.Tensor, ...], torch.Tensor]:
        in_features = ln_weight.numel()
        inputmat = inp.view((-1, in_features))

        # userbuffers all-gather overlap is only set up for training graphs
        ub_split_ag = ub_split_ag and is_grad_enabled and not return_layernorm_output
        if ub_split_ag:
            ub_obj_lnout = get_ub(ub_name + "_fprop")
            ln_out = ub_obj_lnout.get_ubuf_output(0)
        else:
            ln_out = torch.empty_like(inputmat)

        ln_out = torch.nn.functional.layer_norm(inputmat, (in_features,), ln_weight, ln_bias, eps)

        # Column Parallel Linear
        if ub_split_ag:
            ln_out_total = ub_obj_lnout.get_ubuf_output(1)
        elif sequence_parallel:
            ln_out_total, _ = gather_along_first_dim(ln_out, tp_group)
        else:
            ln_out_total = ln_out

        # amax statistics collected here are consumed by later (inference) forwards
        if fp8_calibration and is_grad_enabled:
            fp8_meta["scaling_fwd"].amax_history[0][0] = torch.max(torch.abs(ln_out_total)).float()
            fp8_meta["scaling_fwd"].amax_history[0][1] = torch.max(torch.abs(weight)).float()

        out, _, _ = gemm(
            weight,
            ln_out_total,
            ln_out_total.dtype,
            get_workspace(),
            bias=bias,
            use_bias=use_bias,
            ub_algo=tex.UbufOverlapAlgo.SPLIT_PIPELINED_AG if ub_split_ag else None,
            ub=ub_obj_lnout if ub_split_ag else None,
        )

        if is_grad_enabled:
            ctx.save_for_backward(inputmat, ln_weight, weight, ln_out)
            ctx.use_bias = use_bias
            ctx.sequence_parallel = sequence_parallel
            ctx.tp_group = tp_group
            ctx.tp_size = tp_size

        out = out.view(-1, *inp.shape[1:-1], out.shape[-1])
        if return_layernorm_output:
            return out, ln_out.view_as(inp)
        return out


class LayerNormLinear(TransformerEngineBaseModule):
    def forward(
        self,
        inp: torch.Tensor,
        is_first_microbatch: Optional[bool] = None,
    ) -> Union[torch.Tensor, Tuple[torch.Tensor, ...]]:
        with self.prepare_forward(inp, is_first_microbatch) as inp:
            # Get concatenated weight and bias tensors
            if len(self.parameter_split_sizes) == 1:
                weight_tensor = getattr(self, self.weight_names[0])
                bias_tensor = getattr(self, self.bias_names[0])
            elif torch.is_grad_enabled():
                weight_tensor = _noop_cat(
                    [getattr(self, name) for name in self.weight_names],
                    self.weight_tensor,
                )
                bias_tensor = _noop_cat(
                    [getattr(self, name) for name in self.bias_names],
                    self.bias_tensor,
                )
            else:
                weight_tensor = self.weight_tensor
                bias_tensor = self.bias_tensor

            if torch.is_grad_enabled():
                fwd_fn = _LayerNormLinear.apply
                args = []
            else:
                fwd_fn = _LayerNormLinear.forward
                args = [None]
            args += (
                inp,
                self.layer_norm_weight,
                self.layer_norm_bias,
                weight_tensor,
                bias_tensor,
                self.apply_bias and not self.gemm_bias_unfused_add,
                self.eps,
                self.fp8,
                self.fp8_calibration,
                self.fp8_meta,
                self.tp_group,
                self.tp_size,
                self.sequence_parallel,
                self.return_layernorm_output,
                torch.is_grad_enabled(),
                self.ub_split_ag,
                self.ub_name,
            )
            out = fwd_fn(*args)

        if self.return_layernorm_output:
            out, ln_out = out
            return out, ln_out
        return out
