# Adapted from NVIDIA/TransformerEngine transformer_engine/pytorch/module/layernorm_linear.py
# (_LayerNormLinear.forward and LayerNormLinear.forward), trimmed to the userbuffers / fp8 paths.
import torch

from transformer_engine.pytorch.distributed import gather_along_first_dim, get_distributed_world_size
from transformer_engine.pytorch.module.base import get_ub, get_workspace
import transformer_engine_torch as tex


class _LayerNormLinear(torch.autograd.Function):
    @staticmethod
    def forward(ctx, inp, ln_weight, ln_bias, weight, weight_fp8, eps, fp8, fp8_meta,
                tp_group, sequence_parallel, is_grad_enabled, return_layernorm_output,
                ub_split_ag, ub_name):
        in_features = ln_weight.numel()
        inputmat = inp.view((-1, in_features))

        if ub_split_ag:
            tp_world_size = get_distributed_world_size(tp_group)
            if tp_world_size == 1 or (not is_grad_enabled) or return_layernorm_output:
                ub_split_ag = False
        if ub_split_ag:
            ub_obj_lnout = get_ub(ub_name + "_fprop")
            ln_out = ub_obj_lnout.get_ubuf_output(0)
        else:
            ln_out = torch.empty_like(inputmat)

        ln_out, mu, rsigma = tex.layernorm_fwd(inputmat, ln_weight, ln_bias, eps, ln_out)

        if ub_split_ag:
            ln_out_total = ub_obj_lnout.get_ubuf_output(1)
        elif sequence_parallel:
            ln_out_total, _ = gather_along_first_dim(ln_out, tp_group)
        else:
            ln_out_total = ln_out

        weight_t_fp8 = None
        if fp8:
            if is_grad_enabled or (fp8_meta.get("recompute_enabled") and not fp8_meta.get("in_recompute")):
                weight_t_fp8 = torch.empty_like(weight_fp8).t()
                tex.fp8_cast_transpose_fused(weight, fp8_meta["scaling_fwd"],
                                             cast_out=weight_fp8, transpose_out=weight_t_fp8)
            else:
                tex.cast_to_fp8(weight, fp8_meta["scaling_fwd"], out=weight_fp8)

        out, _, _ = tex.gemm(
            weight_fp8 if fp8 else weight,
            ln_out_total,
            inp.dtype,
            get_workspace(),
            ub_algo=tex.UbufOverlapAlgo.SPLIT_PIPELINED_AG if ub_split_ag else None,
            ub=ub_obj_lnout if ub_split_ag else None,
        )

        if is_grad_enabled:
            ctx.save_for_backward(inputmat, ln_weight, mu, rsigma, weight, weight_t_fp8, ln_out)
            ctx.tp_group = tp_group
            ctx.sequence_parallel = sequence_parallel
            ctx.ub_name = ub_name

        out = out.view(-1, *inp.shape[1:-1], out.shape[-1])
        if return_layernorm_output:
            return out, ln_out.view_as(inp)
        return out


class LayerNormLinear(torch.nn.Module):
    def forward(self, inp):
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
            self.weight,
            self.weight_fp8,
            self.eps,
            self.fp8,
            self.fp8_meta,
            self.tp_group,
            self.sequence_parallel,
            torch.is_grad_enabled(),
            self.return_layernorm_output,
            self.ub_split_ag,
            self.ub_name,
        )
        return fwd_fn(*args)
