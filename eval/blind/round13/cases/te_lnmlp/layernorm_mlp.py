# adapted from NVIDIA/TransformerEngine transformer_engine/pytorch/module/layernorm_mlp.py
"""LayerNormMLP API"""
import os
from typing import Union, Optional, Tuple

import torch

from .. import cpp_extensions as tex
from ..fp8 import FP8GlobalStateManager
from ..utils import cast_if_needed, assert_dim_for_fp8_exec
from ..distributed import get_distributed_world_size, gather_along_first_dim, set_offloading_param
from ..constants import dist_group_type
from ..jit import no_torch_dynamo, bias_gelu_fused
from ..cpp_extensions import general_gemm
from ..tensor.quantized_tensor import Quantizer, prepare_for_saving
from .base import TransformerEngineBaseModule, get_workspace, _2X_ACC_FPROP
from ._common import _act_func, clear_tensor_data, get_ub
from ._ub_config import resolve_ub_config
from ._normalization import apply_normalization

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
        is_first_microbatch: Union[bool, None],
        fp8: bool,
        fp8_calibration: bool,
        fc1_input_quantizer: Optional[Quantizer],
        fc2_input_quantizer: Optional[Quantizer],
        output_quantizer: Optional[Quantizer],
        cpu_offloading: bool,
        tp_group: Union[dist_group_type, None],
        tp_size: int,
        sequence_parallel: bool,
        activation_dtype: torch.dtype,
        return_layernorm_output: bool,
        return_layernorm_output_gathered: bool,
        bias_gelu_fusion: bool,
        is_grad_enabled: bool,
        fwd_ln_sm_margin: int,
        zero_centered_gamma: bool,
        activation: str,
        normalization: str,
        ub_overlap_ag: bool,
        ub_overlap_rs: bool,
        ub_overlap_rs_dgrad: bool,
        ub_bulk_wgrad: bool,
        ub_bulk_dgrad: bool,
        gemm_gelu_fusion: bool,
        debug: bool,
    ) -> Union[Tuple[torch.Tensor, ...], torch.Tensor]:
        # pylint: disable=missing-function-docstring

        in_features, inp_shape = ln_weight.numel(), inp.shape
        # Make sure input dimensions are compatible
        assert inp_shape[-1] == in_features, "GEMM not possible"
        inputmat = inp.view((-1, in_features))
        if fp8:
            assert_dim_for_fp8_exec(inputmat, fc1_weight, fc2_weight)

        activation_func = _act_func(activation)[0]
        device = inp.device

        # Cast for native AMP
        inputmat = cast_if_needed(inputmat, activation_dtype)
        ln_weight = cast_if_needed(ln_weight, activation_dtype)
        if ln_bias is not None:
            ln_bias = cast_if_needed(ln_bias, activation_dtype)

        # for standard fp8: layernorm output = FP8
        #                   only output of the linear is returned
        # for return_layernorm_output: layernorm output = High precision, then cast to FP8
        #                              high precision layernorm output and output of the linear are returned
        with_quantized_norm = fp8 and not return_layernorm_output

        tp_world_size = get_distributed_world_size(tp_group)
        ub_cfg = resolve_ub_config(
            ub_overlap_ag,
            ub_overlap_rs,
            ub_overlap_rs_dgrad,
            ub_bulk_wgrad,
            ub_bulk_dgrad,
            is_grad_enabled,
            return_layernorm_output,
            debug=debug,
        )
        backwards_needs_fc1_input = is_grad_enabled and fc1_weight.requires_grad

        # Configure quantizer for normalization output
        if fp8 and fc1_input_quantizer is None:
            raise ValueError("Missing quantizer for input tensor")

        ub_obj_lnout = None
        ln_out = None
        if ub_cfg.overlap_ag:
            ub_obj_lnout = get_ub("fc1_fprop")
            ln_out = ub_obj_lnout.get_buffer(fc1_input_quantizer, local_chunk=True)
        elif not with_quantized_norm:
            ln_out = torch.empty_like(
                inputmat, dtype=inputmat.dtype, memory_format=torch.contiguous_format, device="cuda"
            )
        with_input_all_gather_nccl = sequence_parallel and ub_obj_lnout is None

        if with_quantized_norm:
            if with_input_all_gather_nccl:
                fc1_input_quantizer.set_usage(rowwise=True, columnwise=False)
            else:
                fc1_input_quantizer.set_usage(
                    rowwise=True,
                    columnwise=backwards_needs_fc1_input,
                )

        # Apply normalization
        ln_out, mu, rsigma = apply_normalization(
            inputmat,
            ln_out,
            ln_weight,
            ln_bias,
            eps,
            fc1_input_quantizer if with_quantized_norm else None,
            inp.dtype,
            normalization,
            fwd_ln_sm_margin,
            zero_centered_gamma,
        )

        # Prepare GEMM input
        # Note: Cast to expected dtype and perform tensor-parallel communication
        ln_out_gathered = False
        if with_input_all_gather_nccl:
            ln_out_total, _ = gather_along_first_dim(
                ln_out,
                tp_group,
                quantizer=(fc1_input_quantizer if fp8 else None),
            )
            ln_out_gathered = True
        elif ub_obj_lnout is not None:
            ln_out_total = ub_obj_lnout.get_buffer(fc1_input_quantizer, False)
        else:
            ln_out_total = ln_out

        ln_out_return = None
        if return_layernorm_output:
            ln_out_return = ln_out_total if return_layernorm_output_gathered else ln_out

        # Cast weights to expected dtype
        fc1_weight_final = cast_if_needed(fc1_weight, activation_dtype)
        fc2_weight_final = cast_if_needed(fc2_weight, activation_dtype)

        # Cast biases to expected dtype
        bias_dtype = activation_dtype
        if fp8 and activation_dtype == torch.float32:
            bias_dtype = torch.bfloat16
        if fc1_bias is not None:
            fc1_bias = cast_if_needed(fc1_bias, bias_dtype)
        if fc2_bias is not None:
            fc2_bias = cast_if_needed(fc2_bias, bias_dtype)

        # Calibrate quantizers if needed
        if not fp8 and fp8_calibration:
            if fc1_input_quantizer is not None:
                fc1_input_quantizer.calibrate(ln_out_total)

        # FC1 GEMM
        if activation != "gelu":
            gemm_gelu_fusion = bias_gelu_fusion = False
        else:
            if fp8:
                assert not bias_gelu_fusion, "Bias gelu fusion is supported only for full precision"
            else:
                gemm_gelu_fusion = True
            if gemm_gelu_fusion and bias_gelu_fusion:
                gemm_gelu_fusion = False

        fc1_outputs = general_gemm(
            fc1_weight_final,
            ln_out_total,
            get_workspace(),
            quantization_params=(
                fc2_input_quantizer if gemm_gelu_fusion else None  # fused gelu output is in fp8
            ),
            out_dtype=activation_dtype,
            bias=(
                fc1_bias if not bias_gelu_fusion else None
            ),  # otherwise bias is added later (fused with gelu)
            gelu=gemm_gelu_fusion,
            accumulate=_2X_ACC_FPROP,
            ub=ub_obj_lnout,
            ub_type=tex.CommOverlapType.AG if ub_obj_lnout is not None else None,
        )
        if not is_grad_enabled and (ln_out_total is not ln_out_return):
            clear_tensor_data(ln_out_total)

        # ACTIVATION - sometimes activation is fused with the GEMM above.
        fc1_out_without_bias = None

        if bias_gelu_fusion:
            fc1_out = None
            fc1_out_without_bias, *_ = fc1_outputs
            act_out = bias_gelu_fused(fc1_out_without_bias, fc1_bias)
        elif gemm_gelu_fusion:
            act_out, _, fc1_out, _ = fc1_outputs
        else:
            fc1_out, *_ = fc1_outputs
            act_out = activation_func(fc1_out, fc2_input_quantizer)

        if fp8_calibration:
            fc2_input_quantizer.calibrate(act_out)

        ub_obj_fc2out = None
        rs_out = None
        if ub_cfg.overlap_rs:
            ub_obj_fc2out = get_ub("fc2_fprop")
            dim_size = list(act_out.size())
            dim_size[0] = dim_size[0] // tp_world_size
            dim_size[1] = fc2_weight.size(0)
            rs_out = torch.empty(dim_size, dtype=activation_dtype, device=device)
            fc2_out = ub_obj_fc2out.get_buffer(output_quantizer)
        else:
            dim_size = list(act_out.size())
            dim_size[1] = fc2_weight.size(0)
            fc2_out = torch.empty(dim_size, dtype=activation_dtype, device=device)

        # FC2 GEMM
        _ = general_gemm(
            fc2_weight_final,
            act_out,
            get_workspace(),
            out_dtype=activation_dtype,
            bias=fc2_bias,
            quantization_params=output_quantizer,
            out=fc2_out,
            use_split_accumulator=_2X_ACC_FPROP,
            ub=ub_obj_fc2out,
            ub_type=tex.CommOverlapType.RS if ub_obj_fc2out is not None else None,
            extra_output=rs_out,
        )
        if not is_grad_enabled:
            clear_tensor_data(act_out, fc1_out_without_bias, fc1_out)

        if is_grad_enabled:
            if cpu_offloading:
                set_offloading_param(ln_weight, "weight_offloading", True)
                set_offloading_param(fc1_weight, "weight_offloading", True)
                set_offloading_param(fc2_weight, "weight_offloading", True)
                set_offloading_param(inputmat, "activation_offloading", True)
                set_offloading_param(mu, "activation_offloading", True)
                set_offloading_param(rsigma, "activation_offloading", True)
                set_offloading_param(ln_out, "activation_offloading", True)
                set_offloading_param(fc1_out, "activation_offloading", True)
                set_offloading_param(act_out, "activation_offloading", True)

            tensors_to_save, tensor_objects = prepare_for_saving(
                inputmat,
                ln_weight,
                ln_out.clone() if ub_obj_lnout is not None else ln_out,  # avoid saving a UB buffer
                fc1_weight_final,
                fc1_bias,
                fc1_out,
                fc1_out_without_bias,
                act_out,
                fc2_weight_final,
                mu,
                rsigma,
            )
            ctx.save_for_backward(*tensors_to_save)
            ctx.tensor_objects = tensor_objects
            ctx.ub_overlap_rs_dgrad = ub_cfg.overlap_rs_dgrad
            ctx.ub_bulk_wgrad = ub_cfg.bulk_wgrad
            ctx.ub_bulk_dgrad = ub_cfg.bulk_dgrad
            ctx.activation_dtype = activation_dtype
            ctx.activation = activation
            ctx.sequence_parallel = sequence_parallel
            ctx.tp_group = tp_group
            ctx.tp_size = tp_size
            ctx.ln_out_gathered = ln_out_gathered

        # Row Parallel Linear
        if ub_obj_fc2out is not None:
            fc2_out = rs_out
        elif sequence_parallel:
            fc2_out, _ = tex.reduce_scatter_along_first_dim(fc2_out, tp_group)
        elif tp_size > 1:
            fc2_out, _ = tex.allreduce(fc2_out, tp_group)

        # [*, in_features] -> [*, out_features] except first dimension changes for SP
        fc2_out = fc2_out.view(-1, *inp_shape[1:-1], fc2_out.shape[-1])

        if return_layernorm_output:
            if return_layernorm_output_gathered:
                shape = list(inp_shape)
                shape[0] *= tp_size
                return fc2_out, ln_out_return.view(shape)
            return fc2_out, ln_out_return.view_as(inp)
        return fc2_out


class LayerNormMLP(TransformerEngineBaseModule):
    r"""
    Applies layer normalization on the input followed by the MLP module, consisting of
    2 successive linear transformations, separated by the GeLU activation.
    """

    def __init__(self, hidden_size: int, ffn_hidden_size: int, eps: float = 1e-5, **kwargs) -> None:
        super().__init__()
        self.hidden_size = hidden_size
        self.ffn_hidden_size = ffn_hidden_size
        self.eps = eps
        self.activation = kwargs.get("activation", "gelu")
        self.normalization = kwargs.get("normalization", "LayerNorm")
        self.return_layernorm_output = kwargs.get("return_layernorm_output", False)
        self.return_layernorm_output_gathered = kwargs.get("return_layernorm_output_gathered", False)
        self.bias_gelu_nvfusion = bool(int(os.getenv("NVTE_BIAS_GELU_NVFUSION", "1")))
        self.gemm_gelu_fusion = bool(int(os.getenv("NVTE_GEMM_GELU_FUSION", "0")))
        self.ub_overlap_ag = kwargs.get("ub_overlap_ag", False)
        self.ub_overlap_rs = kwargs.get("ub_overlap_rs", False)
        self.ub_overlap_rs_dgrad = kwargs.get("ub_overlap_rs_dgrad", False)
        self.ub_bulk_wgrad = kwargs.get("ub_bulk_wgrad", False)
        self.ub_bulk_dgrad = kwargs.get("ub_bulk_dgrad", False)
        self.fwd_ln_sm_margin = int(os.getenv("NVTE_FWD_LAYERNORM_SM_MARGIN", "0"))

    @no_torch_dynamo()
    def forward(
        self, inp: torch.Tensor, is_first_microbatch: Optional[bool] = None
    ) -> Union[torch.Tensor, Tuple[torch.Tensor, ...]]:
        """
        Apply layer normalization to the input followed by a feedforward network (MLP Block).
        """
        debug = self.is_debug_iter()

        with self.prepare_forward(inp, num_gemms=2) as inp:
            quantizers = self._get_quantizers()
            (fc1_input_quantizer, fc2_input_quantizer, output_quantizer) = quantizers

            from ..cpu_offload import CPUOffloadEnabled

            if torch.is_grad_enabled():
                fwd_fn = _LayerNormMLP.apply
                args = []
            else:
                fwd_fn = _LayerNormMLP.forward
                args = [None]
            args += (
                inp,
                self.layer_norm_weight,
                self.layer_norm_bias,
                self.fc1_weight,
                self.fc1_bias,
                self.fc2_weight,
                self.fc2_bias if not self.gemm_bias_unfused_add else None,
                self.eps,
                is_first_microbatch,
                self.fp8,
                self.fp8_calibration,
                fc1_input_quantizer,
                fc2_input_quantizer,
                output_quantizer,
                CPUOffloadEnabled,
                self.tp_group,
                self.tp_size,
                self.sequence_parallel,
                self.activation_dtype,
                self.return_layernorm_output,
                self.return_layernorm_output_gathered,
                self.bias_gelu_nvfusion and not self.fp8,
                torch.is_grad_enabled(),
                self.fwd_ln_sm_margin,
                self.zero_centered_gamma,
                self.activation,
                self.normalization,
                self.ub_overlap_ag,
                self.ub_overlap_rs,
                self.ub_overlap_rs_dgrad,
                self.ub_bulk_wgrad,
                self.ub_bulk_dgrad,
                self.gemm_gelu_fusion,
                debug,
            )
            out = fwd_fn(*args)

        if self.return_layernorm_output:
            out, ln_out = out

        if self.gemm_bias_unfused_add:
            out = out + cast_if_needed(self.fc2_bias, self.activation_dtype)

        if self.return_layernorm_output:
            return out, ln_out
        return out
