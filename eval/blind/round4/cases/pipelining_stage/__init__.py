# Modeled on torch/distributed/pipelining/stage.py (_PipelineStageBase.forward_one_chunk,
# get_fwd_send_ops, fwd_cache) and schedules.py (ScheduleGPipe._step_microbatches,
# _batch_p2p / _sorted_batch_p2p).
from .schedules import ScheduleGPipe
from .stage import PipelineStage
