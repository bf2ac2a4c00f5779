# adapted from pytorch/pytorch torch/distributed/pipelining/_PipelineStage.py
from ._opts import ScheduleOpts, current_opts
from .stage import PipelineStage
from .schedules import ScheduleGPipe
