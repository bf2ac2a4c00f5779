# Modelled on Megatron-LM megatron/core/distributed/fsdp/src/megatron_fsdp/{megatron_fsdp.py,param_and_grad_buffer.py,utils.py}
from .megatron_fsdp import MegatronFSDP

__all__ = ["MegatronFSDP"]
