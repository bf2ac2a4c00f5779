# adapted from volcengine/verl verl/utils/ulysses.py
from .ulysses import gather_seq_scatter_heads, gather_heads_scatter_seq
from .attention import _ulysses_flash_attention_forward
