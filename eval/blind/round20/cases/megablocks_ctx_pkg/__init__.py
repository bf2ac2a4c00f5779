# adapted from databricks/megablocks megablocks/layers/moe.py
from ._context import FORWARD_CTX, install_forward_context
from .moe import MoE

__all__ = ["FORWARD_CTX", "install_forward_context", "MoE"]
