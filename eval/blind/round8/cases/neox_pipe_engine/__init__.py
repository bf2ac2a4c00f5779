from .engine import PipelineEngine, StepMeta

__all__ = ["PipelineEngine", "StepMeta"]
