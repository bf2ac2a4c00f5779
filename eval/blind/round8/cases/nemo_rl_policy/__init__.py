from .context import ForwardContext
from .worker import PolicyWorker

__all__ = ["ForwardContext", "PolicyWorker"]
