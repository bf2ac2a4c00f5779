# Package adapted from huggingface/peft src/peft/tuners/lora/{layer.py,config.py} and tuners_utils.py
from .runtime import LoraRuntime, current_runtime
from .layer import LoraLinear
