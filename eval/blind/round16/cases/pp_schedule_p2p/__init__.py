# adapted from pytorch/pytorch torch/distributed/pipelining/__init__.py
# Copyright (c) Meta Platforms, Inc. and affiliates
from .schedules import PipelineScheduleSingle, ScheduleGPipe
from .stage import _PipelineStageBase, PipelineStage

__all__ = [
    "PipelineStage",
    "PipelineScheduleSingle",
    "ScheduleGPipe",
]
