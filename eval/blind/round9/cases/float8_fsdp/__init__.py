from .config import Float8LinearConfig
from .float8_linear import Float8Linear
from .fsdp_utils import WeightWithDynamicFloat8CastTensor

__all__ = ["Float8Linear", "Float8LinearConfig", "WeightWithDynamicFloat8CastTensor"]
