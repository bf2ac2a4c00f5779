"""Column-parallel FP8 linear with optional split-pipelined all-gather/GEMM overlap.

Modelled on the tp_comm_overlap paths of Megatron-LM + TransformerEngine (Userbuffers).
"""
import torch
import torch.distributed as dist

import transformer_engine_torch as tex
from transformer_engine.pytorch.module.base import get_ub, get_workspace


class OverlappedColumnParallelLinear(torch.nn.Module):

    def __init__(self, config, weight: torch.nn.Parameter, tp_group, ub_name: str = "qkv"):
        super().__init__()
        self.config = config
        self.weight = weight
        self.tp_group = tp_group
        self.tp_size = dist.get_world_size(tp_group)
        self.ub_name = ub_name
        self._weight_t_cache = None

    def _gather_input(self, inp: torch.Tensor):
        dim_size = list(inp.size())
        dim_size[0] *= self.tp_size
        out = torch.empty(dim_size, dtype=inp.dtype, device=inp.device)
        dist.all_gather_into_tensor(out, inp.contiguous(), group=self.tp_group)
        return out

    def forward(self, inp: torch.Tensor, weight_fp8: torch.Tensor):
        use_pipelined_ag = all(
            [
                self.config.tp_comm_overlap,
                self.config.tp_comm_split_ag,
                torch.is_grad_enabled(),
                self.tp_size > 1,
            ]
        )

        if any([torch.is_grad_enabled() and self.weight.requires_grad, self.config.keep_fp8_transpose_cache]):
            # Transposed FP8 weight is only consumed by the dgrad GEMM in backward.
            self._weight_t_cache = tex.fp8_transpose(weight_fp8, tex.DType.kFloat8E4M3)

        if use_pipelined_ag:
            ub_obj = get_ub(self.ub_name + "_fprop")
            ub_obj.copy_into_buffer(inp, local_chunk=True)
            total_input = ub_obj.get_buffer(local_chunk=False)
            out, *_ = tex.general_gemm(
                weight_fp8, total_input, get_workspace(), out_dtype=torch.bfloat16,
                ub=ub_obj, ub_type=tex.CommOverlapType.AG,
            )
        else:
            total_input = self._gather_input(inp)
            out, *_ = tex.general_gemm(weight_fp8, total_input, get_workspace(), out_dtype=torch.bfloat16)
        return out
