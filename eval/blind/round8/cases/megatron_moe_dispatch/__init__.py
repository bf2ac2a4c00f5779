from .layer import MoELayer

__all__ = ["MoELayer"]
