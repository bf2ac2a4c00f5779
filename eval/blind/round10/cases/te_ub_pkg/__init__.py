# Package adapted from NVIDIA/TransformerEngine transformer_engine/pytorch/module/{base.py,linear.py}
from .config import FwdConfig, make_fwd_config
from .linear import Linear

__all__ = ["FwdConfig", "make_fwd_config", "Linear"]
