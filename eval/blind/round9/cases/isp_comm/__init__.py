from .communicator import ISPCommunicator
from .hooks import ISPCommunicatorSchedulerHook
from .seq_all2all import DistributedAttention

__all__ = ["DistributedAttention", "ISPCommunicator", "ISPCommunicatorSchedulerHook"]
