# Adapted from pytorch/pytorch torch/distributed/pipelining (stage.py _PipelineStageBase.forward_one_chunk,
# schedules.py _batch_p2p / _sorted_batch_p2p / ScheduleGPipe._step_microbatches).
from .context import StageRuntimeCtx, make_runtime_ctx
from .schedules import ScheduleGPipe
from .stage import PipelineStage

__all__ = ["StageRuntimeCtx", "make_runtime_ctx", "ScheduleGPipe", "PipelineStage"]
