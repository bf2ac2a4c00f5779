# adapted from huggingface/accelerate src/accelerate/utils/operations.py
from .decorators import ConvertOutputsToFp32, convert_outputs_to_fp32
from .operations import convert_to_fp32, recursively_apply

__all__ = ["ConvertOutputsToFp32", "convert_outputs_to_fp32", "convert_to_fp32", "recursively_apply"]
