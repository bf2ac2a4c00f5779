# Modeled on ColossalAI colossalai/shardformer/shard/shard_config.py (ShardConfig.enable_sequence_overlap)
# and colossalai/shardformer/layer/qkv_fused_linear.py / _operation.py
# (_MatmulWithGatherForwardReduceScatterBackward with overlap / ring).
from .linear import GPT2FusedLinearConv1D_Col
from .shard_config import ShardConfig, sequence_overlap_active
