# Adapted from NVIDIA/TransformerEngine transformer_engine/pytorch/module/layernorm_linear.py
# (LayerNormLinear.forward / _LayerNormLinear.forward, userbuffers overlap selection)
import torch
import torch.distributed as dist


class _LayerNormLinear(torch.autograd.Function):
    @staticmethod
    def forward(ctx, inp, ln_weight, weight, eps, tp_group, ub_overlap_ag_fprop,
                return_layernorm_output, is_grad_enabled):
        ub_overlap_ag_fprop = ub_overlap_ag_fprop and is_grad_enabled and not return_layernorm_output
        ln_out = torch.nn.functional.layer_norm(inp, inp.shape[-1:], ln_weight, None, eps)
        world = dist.get_world_size(tp_group)
        if ub_overlap_ag_fprop:
            ln_out_total = _ub_all_gather_gemm(ln_out, weight, tp_group)
            out = ln_out_total
        else:
            gathered = torch.empty((ln_out.shape[0] * world,) + ln_out.shape[1:],
                                   dtype=ln_out.dtype, device=ln_out.device)
            dist.all_gather_into_tensor(gathered, ln_out, group=tp_group)
            out = torch.matmul(gathered, weight.t())
        if is_grad_enabled:
            ctx.save_for_backward(inp, ln_weight, weight, ln_out)
            ctx.tp_group = tp_group
        if return_layernorm_output:
            return out, ln_out
        return out


def _ub_all_gather_gemm(x, w, group):
    buf = torch.empty((x.shape[0] * dist.get_world_size(group),) + x.shape[1:],
                      dtype=x.dtype, device=x.device)
    dist.all_gather_into_tensor(buf, x, group=group)
    return torch.matmul(buf, w.t())


class LayerNormLinear(torch.nn.Module):
    def __init__(self, hidden, out, tp_group=None, ub_overlap_ag=True):
        super().__init__()
        self.ln_weight = torch.nn.Parameter(torch.ones(hidden))
        self.weight = torch.nn.Parameter(torch.empty(out, hidden))
        self.tp_group = tp_group
        self.ub_overlap_ag = ub_overlap_ag
        self.return_layernorm_output = False

    def forward(self, inp):
        if torch.is_grad_enabled():
            fwd_fn = _LayerNormLinear.apply
            args = []
        else:
            fwd_fn = _LayerNormLinear.forward
            args = [None]
        args += (inp, self.ln_weight, self.weight, 1e-5, self.tp_group,
                 self.ub_overlap_ag, self.return_layernorm_output, torch.is_grad_enabled())
        return fwd_fn(*args)
