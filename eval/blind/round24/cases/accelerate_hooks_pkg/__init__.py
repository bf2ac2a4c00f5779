# adapted from huggingface/accelerate src/accelerate/hooks.py
from .hooks import GradModeHook, add_hook_to_module
from .modeling import OffloadedBlock
