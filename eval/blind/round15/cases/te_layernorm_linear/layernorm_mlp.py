# adapted from NVIDIA/TransformerEngine transformer_engine/pytorch/module/layernorm_mlp.py
"""LayerNormMLP API"""
from typing import Any, Dict, Optional, Tuple, Union

import torch
from torch.nn import init

import transformer_engine_torch as tex
from .base import TransformerEngineBaseModule, get_ub, get_workspace
from ..distributed import allreduce, gather_along_first_dim, get_distributed_world_size, reduce_scatter_along_first_dim
from ..utils import cast_if_needed, clear_tensor_data, divide
from ._common import _apply_normalization
from ..jit import bias_gelu_fused

__all__ = ["LayerNormMLP"]


class _LayerNormMLP(torch.autograd.Function):
    """LayerNormMLP semi-top level module
    Calls custom cuda extensions.
    """

    @staticmethod
    def forward(
        ctx,
        inp: torch.Tensor,
        ln_weight: torch.Tensor,
        ln_bias: torch.Tensor,
        fc1_weight: torch.Tensor,
        fc1_bias: torch.Tensor,
        fc2_weight: torch.Tensor,
        fc2_bias: torch.Tensor,
        eps: float,
        tp_group,
        tp_size: int,
        sequence_parallel: bool,
        tensor_parallel: bool,
        activation_dtype: torch.dtype,
        is_grad_enabled: bool,
        normalization: str,
        set_parallel_mode: bool,
        ub_overlap_rs: bool,
        ub_overlap_ag: bool,
    ) -> Union[Tuple[torch.Tensor, ...], torch.Tensor]:
        in_features = ln_weight.numel()
        assert inp.shape[-1] == in_features, "GEMM not possible"
        inputmat = inp.view((-1, in_features))
        inputmat = cast_if_needed(inputmat, activation_dtype)
        ln_weight = cast_if_needed(ln_weight, activation_dtype)
        ln_bias = cast_if_needed(ln_bias, activation_dtype)

        tp_world_size = get_distributed_world_size(tp_group)
        if tp_world_size == 1:
            ub_overlap_ag = False
            ub_overlap_rs = False
        ub_overlap_rs &= bool(is_grad_enabled)

        ln_out = torch.empty_like(inputmat)
        ln_out, mu, rsigma = _apply_normalization(inputmat, ln_out, ln_weight, ln_bias, eps, False, None, normalization)

        if ub_overlap_ag:
            ub_obj_lnout = get_ub("fc1_fprop")
            ln_out_total = ub_obj_lnout.get_ubuf_output(1)
        elif set_parallel_mode and sequence_parallel:
            ln_out_total, _ = gather_along_first_dim(ln_out, tp_group)
        else:
            ln_out_total = ln_out

        fc1_weight = cast_if_needed(fc1_weight, activation_dtype)
        fc2_weight = cast_if_needed(fc2_weight, activation_dtype)
        fc1_bias = cast_if_needed(fc1_bias, activation_dtype)
        fc2_bias = cast_if_needed(fc2_bias, activation_dtype)

        fc1_outputs = tex.gemm(fc1_weight, ln_out_total, activation_dtype, get_workspace(), bias=fc1_bias, use_bias=True)
        fc1_out = fc1_outputs[0]
        gelu_out = bias_gelu_fused(fc1_out, fc1_bias)
        if not is_grad_enabled:
            clear_tensor_data(fc1_out)

        if ub_overlap_rs:
            ub_obj_fc2out = get_ub("fc2_fprop")
            fc2_out = ub_obj_fc2out.get_ubuf_output(1)
            dim_size = list(gelu_out.size())
            dim_size[0] = dim_size[0] // tp_world_size
            dim_size[1] = fc2_weight.size(0)
            rs_out = torch.empty(dim_size, dtype=activation_dtype, device=gelu_out.device)
            ub_algo = tex.CommOverlapAlgo.SPLIT_PIPELINED_RS
        else:
            ub_obj_fc2out = None
            rs_out = None
            ub_algo = None

        fc2_outputs = tex.gemm(
            fc2_weight,
            gelu_out,
            activation_dtype,
            get_workspace(),
            bias=fc2_bias,
            use_bias=True,
            ub_algo=ub_algo,
            ub=ub_obj_fc2out,
            extra_output_tensor=rs_out,
        )
        fc2_out = fc2_outputs[0]

        if is_grad_enabled:
            ctx.save_for_backward(inputmat, ln_weight, mu, rsigma, ln_out, fc1_out, gelu_out, fc1_weight, fc2_weight)
            ctx.activation_dtype = activation_dtype
            ctx.tp_group = tp_group
            ctx.sequence_parallel = sequence_parallel
            ctx.inp_shape = inp.shape

        if ub_obj_fc2out is not None:
            fc2_out = rs_out
        elif set_parallel_mode and sequence_parallel:
            fc2_out, _ = reduce_scatter_along_first_dim(fc2_out, tp_group)
        elif set_parallel_mode and tensor_parallel:
            fc2_out, _ = allreduce(fc2_out, tp_group)

        return fc2_out.view(-1, *inp.shape[1:-1], fc2_out.shape[-1])

    @staticmethod
    def backward(ctx, *grad_outputs: Tuple[torch.Tensor, ...]) -> Tuple[Union[torch.Tensor, None], ...]:
        raise NotImplementedError("see upstream")


class LayerNormMLP(TransformerEngineBaseModule):
    r"""
    Applies layer normalization on the input followed by the MLP module, consisting of
    2 successive linear transformations, separated by the GeLU activation.
    """

    def __init__(
        self,
        hidden_size: int,
        ffn_hidden_size: int,
        eps: float = 1e-5,
        sequence_parallel: bool = False,
        tp_group=None,
        tp_size: int = 1,
        normalization: str = "LayerNorm",
        set_parallel_mode: bool = False,
        params_dtype: Optional[torch.dtype] = None,
        ub_overlap_rs: bool = False,
        ub_overlap_ag: bool = False,
    ) -> None:
        super().__init__()
        params_dtype = torch.get_default_dtype() if params_dtype is None else params_dtype
        self.normalization = normalization
        self.set_parallel_mode = set_parallel_mode
        self.tp_group = tp_group
        self.tp_size = tp_size
        self.sequence_parallel = (self.tp_size > 1) and sequence_parallel
        self.eps = eps
        self.ub_overlap_rs = ub_overlap_rs
        self.ub_overlap_ag = ub_overlap_ag
        self.size_per_partition = divide(ffn_hidden_size, self.tp_size)
        self.layer_norm_weight = torch.nn.Parameter(torch.empty(hidden_size, device="cuda", dtype=params_dtype))
        self.layer_norm_bias = torch.nn.Parameter(torch.empty(hidden_size, device="cuda", dtype=params_dtype))
        self.fc1_weight = torch.nn.Parameter(torch.empty(self.size_per_partition, hidden_size, device="cuda", dtype=params_dtype))
        self.fc1_bias = torch.nn.Parameter(torch.empty(self.size_per_partition, device="cuda", dtype=params_dtype))
        self.fc2_weight = torch.nn.Parameter(torch.empty(hidden_size, self.size_per_partition, device="cuda", dtype=params_dtype))
        self.fc2_bias = torch.nn.Parameter(torch.empty(hidden_size, device="cuda", dtype=params_dtype))
        init.ones_(self.layer_norm_weight)
        init.zeros_(self.layer_norm_bias)

    def forward(self, inp: torch.Tensor) -> Union[torch.Tensor, Tuple[torch.Tensor, ...]]:
        with self.prepare_forward(inp, num_gemms=2) as inp:
            fwd_fn, args = (
                (_LayerNormMLP.apply, []) if torch.is_grad_enabled() else (_LayerNormMLP.forward, [None])
            )
            args += (
                inp,
                self.layer_norm_weight,
                self.layer_norm_bias,
                self.fc1_weight,
                self.fc1_bias,
                self.fc2_weight,
                self.fc2_bias,
                self.eps,
                self.tp_group,
                self.tp_size,
                self.sequence_parallel,
                self.tp_size > 1,
                self.activation_dtype,
                torch.is_grad_enabled(),
                self.normalization,
                self.set_parallel_mode,
                self.ub_overlap_rs,
                self.ub_overlap_ag,
            )
            out = fwd_fn(*args)
        return out
