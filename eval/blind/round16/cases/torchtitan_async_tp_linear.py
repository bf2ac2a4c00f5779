# adapted from pytorch/torchtitan torchtitan/models/common/async_linear.py
from __future__ import annotations

import logging

import torch
import torch.distributed as dist
import torch_remat as remat

from torchtitan.distributed.spmd_types import current_spmd_mesh
from torchtitan.models.common.linear import ColumnParallelLinear, RowParallelLinear

logger = logging.getLogger(__name__)


class AsyncAllGatherLinear(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x_shard_m, w_shard_n, bias_shard_n, group, group_name):
        import torch.distributed._symmetric_memory  # noqa: F401

        x_full, outputs = torch.ops.symm_mem.fused_all_gather_matmul(x_shard_m.contiguous(), [w_shard_n.T], 0, group_name)
        y_shard_n = outputs[0]
        if bias_shard_n is not None:
            y_shard_n = y_shard_n + bias_shard_n
        x_shard_k = torch.chunk(x_full, group.size(), dim=1)[group.rank()].contiguous()
        ctx.save_for_backward(x_shard_k, w_shard_n)
        ctx.group_name = group_name
        ctx.has_bias = bias_shard_n is not None
        return y_shard_n


class AsyncLinearReduceScatter(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x_shard_k, w_shard_k, bias, group, group_name):
        y_shard_m = torch.ops.symm_mem.fused_matmul_reduce_scatter(x_shard_k.contiguous(), w_shard_k.T, "sum", 0, group_name)
        if bias is not None:
            y_shard_m = y_shard_m + bias
        ctx.save_for_backward(x_shard_k, w_shard_k)
        ctx.group = group
        ctx.group_name = group_name
        ctx.has_bias = bias is not None
        return y_shard_m


def _tp_group_from_context() -> dist.ProcessGroup | None:
    mesh = current_spmd_mesh()
    if mesh is None or "tp" not in (mesh.mesh_dim_names or ()):
        return None
    tp_group = mesh.get_group("tp")
    return tp_group if tp_group.size() > 1 else None


class AsyncColumnParallelLinear(ColumnParallelLinear):
    """Overlap an input all-gather with a column-parallel GEMM."""

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        tp_group = _tp_group_from_context()
        if tp_group is None or not torch.is_grad_enabled():
            return super().forward(input)

        weight_NK, bias_N = self._flatten_weight_and_bias(self.weight, self.bias)
        output = remat.region(
            AsyncAllGatherLinear.apply,
            self.remat_region_name("linear"),
            recompute=self.remat_should_recompute("linear") and torch.is_grad_enabled(),
        )(input, weight_NK, bias_N, tp_group, tp_group.group_name)
        return self._unflatten_output(output, self.weight)


class AsyncRowParallelLinear(RowParallelLinear):
    """Overlap a row-parallel GEMM with its output reduce-scatter."""

    _overlap_ok: bool | None = None

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        tp_group = _tp_group_from_context()
        if self._overlap_ok is None:
            # resolved once, on the first call
            self._overlap_ok = torch.is_grad_enabled()
        if tp_group is None or not self._overlap_ok:
            return super().forward(input)

        weight_NK, bias_N = self._flatten_weight_and_bias(self.weight, self.bias)
        output = AsyncLinearReduceScatter.apply(input, weight_NK, bias_N, tp_group, tp_group.group_name)
        return self._unflatten_output(output, self.weight)
