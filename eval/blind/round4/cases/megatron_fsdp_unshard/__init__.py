# Modeled on Megatron-LM megatron/core/distributed/fsdp/src/megatron_fsdp (megatron_fsdp.py hooks +
# param_and_grad_buffer.py AllGatherPipeline).
from .all_gather_pipeline import AllGatherPipeline, PrefetchOrder
from .hooks import register_fsdp_forward_hooks

__all__ = ["AllGatherPipeline", "PrefetchOrder", "register_fsdp_forward_hooks"]
