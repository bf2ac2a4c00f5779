# adapted from huggingface/accelerate src/accelerate/hooks.py
from .hooks import AlignDevicesHook
from .state import get_forward_state
