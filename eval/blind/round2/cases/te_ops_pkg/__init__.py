# Modelled on TransformerEngine 2.x transformer_engine/pytorch/ops/{fuser.py,fused/userbuffers_forward_linear.py}
from .fuser import OperationFuser

__all__ = ["OperationFuser"]
