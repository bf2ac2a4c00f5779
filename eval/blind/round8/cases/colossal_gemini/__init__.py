from .ddp import GeminiDDP
from .hook import GeminiZeROHook

__all__ = ["GeminiDDP", "GeminiZeROHook"]
