from .linear import Linear1D_Col, Linear1D_Row
from .parallel_module import ParallelModule

__all__ = ["Linear1D_Col", "Linear1D_Row", "ParallelModule"]
