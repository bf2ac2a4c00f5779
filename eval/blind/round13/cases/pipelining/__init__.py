# adapted from pytorch/pytorch torch/distributed/pipelining/__init__.py
from .schedules import PipelineScheduleSingle, ScheduleGPipe
from .stage import PipelineStage

__all__ = ["PipelineScheduleSingle", "ScheduleGPipe", "PipelineStage"]
