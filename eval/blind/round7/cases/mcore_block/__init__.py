from .transformer_block import TransformerBlock
from .runtime import RuntimeFlags
