from .moe import MoEBase, MoEForwardState

__all__ = ["MoEBase", "MoEForwardState"]
