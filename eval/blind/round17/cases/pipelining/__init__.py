# adapted from pytorch/pytorch torch/distributed/pipelining/stage.py
from .schedules import ScheduleGPipe
from .stage import PipelineStage
