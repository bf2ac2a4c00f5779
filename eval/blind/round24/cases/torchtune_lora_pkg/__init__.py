# adapted from pytorch/torchtune torchtune/modules/peft/lora.py
from .lora import LoRALinear
