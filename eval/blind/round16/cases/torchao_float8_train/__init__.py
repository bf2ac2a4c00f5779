# adapted from pytorch/ao torchao/float8/__init__.py
# Lets define a few top level things here
from torchao.float8.config import CastConfig, Float8GemmConfig, Float8LinearConfig, ScalingType

from .float8_linear import Float8Linear
from .float8_tensor import GemmInputRole, LinearMMConfig, ScaledMMConfig
from .fsdp_utils import precompute_float8_dynamic_scale_for_fsdp

__all__ = [
    # configuration
    "ScalingType",
    "Float8GemmConfig",
    "Float8LinearConfig",
    "CastConfig",
    # top level UX
    "precompute_float8_dynamic_scale_for_fsdp",
    # note: Float8Tensor and Float8Linear are not public APIs
]
