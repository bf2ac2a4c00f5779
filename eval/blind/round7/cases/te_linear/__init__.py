from .module import Linear

__all__ = ["Linear"]
