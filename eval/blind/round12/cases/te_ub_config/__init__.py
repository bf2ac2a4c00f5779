# adapted from NVIDIA/TransformerEngine transformer_engine/pytorch/module/layernorm_mlp.py
from .config import ForwardCommConfig
from .function import _Linear
from .module import Linear

__all__ = ["ForwardCommConfig", "_Linear", "Linear"]
