# adapted from vllm-project/vllm vllm/model_executor/layers/fused_moe/layer.py
from .layer import FusedMoE
from .runner import DefaultMoERunner
