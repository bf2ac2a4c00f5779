from .context import TrainPipelineContext
from .pipeline import SparseDistPipeline

__all__ = ["TrainPipelineContext", "SparseDistPipeline"]
