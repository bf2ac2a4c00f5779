# Modelled on transformer_engine/pytorch/ops/ (TransformerEngine 2.x operation-based API).
from .fuser import OperationFuser
from .basic_linear import BasicLinear

__all__ = ["OperationFuser", "BasicLinear"]
