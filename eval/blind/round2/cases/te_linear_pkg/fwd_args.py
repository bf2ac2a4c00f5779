# Modelled on TransformerEngine 2.x LinearFwdArgs (transformer_engine/pytorch/module/linear.py)
from dataclasses import dataclass
from typing import Any, Optional

import torch

from transformer_engine.pytorch.quantized_tensor import Quantizer


@dataclass
class LinearFwdArgs:
    """Non-tensor arguments of the Linear forward, bundled to cut autograd arg-checking overhead."""

    weight: torch.Tensor
    inp: torch.Tensor
    bias: Optional[torch.Tensor]

    input_requires_grad: bool
    weight_requires_grad: bool
    bias_requires_grad: bool

    input_quantizer: Optional[Quantizer]
    weight_quantizer: Optional[Quantizer]
    output_quantizer: Optional[Quantizer]
    grad_input_quantizer: Optional[Quantizer]

    activation_dtype: torch.dtype
    fp8: bool
    fp8_output: bool

    parallel_mode: Optional[str]
    tp_group: Optional[Any]
    tp_size: int
    tensor_parallel: bool
    sequence_parallel: bool
    symmetric_ar_type: Optional[str]

    ub_name: Optional[str]
    ub_overlap_ag_fprop: bool
    ub_overlap_rs_fprop: bool

    fsdp_group: Optional[Any]
    is_fsdp2: bool
    cpu_offloading: bool
    is_grad_enabled: bool

    def compile_unsupported_reason(self) -> Optional[str]:
        """Reason this config can't use the torch.compile custom-op path (else None)."""
        if self.fsdp_group is not None:
            return "manual TE FSDP (fsdp_group); use FSDP2 or MCore FSDP"
        if (
            self.fp8_output
            and self.is_grad_enabled
            and (self.input_requires_grad or self.weight_requires_grad or self.bias_requires_grad)
        ):
            return "differentiable fp8_output=True"
        if self.cpu_offloading:
            return "CPU activation offloading"
        return None
