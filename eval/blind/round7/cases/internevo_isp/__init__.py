from .communicator import ISPCommunicator
from .hooks import register_isp_hooks
