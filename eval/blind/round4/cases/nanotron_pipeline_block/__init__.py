# Modeled on nanotron src/nanotron/parallel/pipeline_parallel/state.py (PipelineTrainBatchState /
# PipelineEvalBatchState) and block.py (PipelineBlock.forward with p2p send/recv).
from .block import PipelineBlock
from .state import PipelineBatchState, PipelineEvalBatchState, PipelineTrainBatchState
