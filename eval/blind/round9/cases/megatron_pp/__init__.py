from .p2p_communication import recv_forward, send_forward
from .schedules import forward_backward_pipelining_without_interleaving, forward_step

__all__ = ["forward_backward_pipelining_without_interleaving", "forward_step", "recv_forward", "send_forward"]
