from .options import ForwardOptions, current_options
from .layers import StandardTransformerDecoder

__all__ = ["ForwardOptions", "current_options", "StandardTransformerDecoder"]
