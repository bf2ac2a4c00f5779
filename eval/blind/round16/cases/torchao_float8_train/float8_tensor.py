# adapted from pytorch/ao torchao/float8/float8_tensor.py
import enum
from typing import NamedTuple

import torch

aten = torch.ops.aten


class ScaledMMConfig(NamedTuple):
    """Configuration for the scaled_mm in the forward and backward pass.

    Attributes:
        emulate (bool): Whether to emulate the matmuls in fp32.
        use_fast_accum (bool): Whether to use the fast-accumulation option for scaled_mm.
        fp8_output (bool): Whether to output the result of the scaled_mm in fp8.
        pad_inner_dim (bool): Whether to pad the inner dimension of a and b with 0s.
    """

    emulate: bool = False
    use_fast_accum: bool = False
    fp8_output: bool = False
    pad_inner_dim: bool = False


class LinearMMConfig(NamedTuple):
    """Configuration for different gemm operations in LinearMM."""

    output: ScaledMMConfig = ScaledMMConfig(False, True, False, False)
    grad_input: ScaledMMConfig = ScaledMMConfig(False, False, False, False)
    grad_weight: ScaledMMConfig = ScaledMMConfig(False, False, False, False)


class GemmInputRole(enum.Enum):
    """Given a Float8Tensor, the enum below describes the expected role of this tensor in a gemm."""

    INPUT = "input"
    WEIGHT = "weight"
    GRAD_OUTPUT = "grad_output"


def choose_scaled_mm_config(
    a_role: GemmInputRole,
    a_linear_mm_config: LinearMMConfig,
    b_role: GemmInputRole,
    b_linear_mm_config: LinearMMConfig,
) -> ScaledMMConfig:
    if a_role is GemmInputRole.INPUT and b_role is GemmInputRole.WEIGHT:
        assert a_linear_mm_config.output == b_linear_mm_config.output
        return a_linear_mm_config.output
    elif a_role is GemmInputRole.GRAD_OUTPUT and b_role is GemmInputRole.WEIGHT:
        return a_linear_mm_config.grad_input
    elif a_role is GemmInputRole.GRAD_OUTPUT and b_role is GemmInputRole.INPUT:
        return a_linear_mm_config.grad_weight
    raise AssertionError(f"unexpected a_role {a_role} and b_role {b_role}")


def linear_mm_config_for_step(base: LinearMMConfig, training_step: bool) -> LinearMMConfig:
    """Per-step view of a Float8Linear's three gemm configs."""
    # fast accumulation is a throughput option for training steps
    output = base.output._replace(use_fast_accum=base.output.use_fast_accum and training_step)
    # the wgrad gemm only runs in backward
    grad_weight = base.grad_weight._replace(use_fast_accum=base.grad_weight.use_fast_accum and training_step)
    return LinearMMConfig(output, base.grad_input, grad_weight)
