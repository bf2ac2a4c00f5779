# Modelled on Megatron-LM megatron/core/pipeline_parallel/{schedules.py,p2p_communication.py}
from .schedules import forward_backward_pipelining_without_interleaving

__all__ = ["forward_backward_pipelining_without_interleaving"]
