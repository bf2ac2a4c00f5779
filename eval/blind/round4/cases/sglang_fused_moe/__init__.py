# Modeled on sglang python/sglang/srt/layers/moe (fused_moe_triton/layer.py FusedMoE.forward,
# moe_runner config, fused_experts(inplace=...)).
from .config import MoeRunnerConfig
from .layer import FusedMoE
