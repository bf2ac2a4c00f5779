# adapted from Dao-AILab/flash-attention flash_attn/__init__.py
from .interface import flash_attn_func, flash_attn_qkvpacked_func

__all__ = ["flash_attn_func", "flash_attn_qkvpacked_func"]
