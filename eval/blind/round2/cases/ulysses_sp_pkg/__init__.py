# Modelled on verl verl/utils/ulysses.py and verl/models/transformers/monkey_patch.py (Ulysses sequence parallel)
from .attention import UlyssesAttention

__all__ = ["UlyssesAttention"]
