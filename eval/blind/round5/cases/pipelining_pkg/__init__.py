"""Modelled on PyTorch torch/distributed/pipelining (stage.py _PipelineStageBase,
schedules.py PipelineScheduleSingle / Schedule1F1B, microbatch.py split_args_kwargs_into_chunks)."""
from .schedule import ScheduleSimple

__all__ = ["ScheduleSimple"]
