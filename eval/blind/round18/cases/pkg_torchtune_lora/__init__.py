# adapted from pytorch/torchtune torchtune/modules/peft/lora.py
from ._mode import lora_step, is_lora_training
from .lora import LoRALinear
from .qat_lora import QATLoRALinear

__all__ = ["LoRALinear", "QATLoRALinear", "is_lora_training", "lora_step"]
