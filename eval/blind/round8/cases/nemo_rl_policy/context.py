from dataclasses import dataclass
from typing import Any, Optional


@dataclass
class ForwardContext:
    needs_backward: bool
    sequence_packing: bool = False
    cp_group: Optional[Any] = None
    pad_token_id: int = 0
