# adapted from pytorch/pytorch torch/distributed/pipelining/stage.py
from ._utils import RuntimeFlags, make_runtime_flags
from .stage import PipelineStage

__all__ = ["RuntimeFlags", "make_runtime_flags", "PipelineStage"]
