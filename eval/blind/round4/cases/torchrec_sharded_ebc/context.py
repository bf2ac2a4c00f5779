from dataclasses import dataclass, field
from typing import List, Optional

import torch


@dataclass
class EmbeddingBagCollectionContext:
    sharding_contexts: List[Optional[object]] = field(default_factory=list)
    inverse_indices: Optional[tuple] = None
    variable_batch_per_feature: bool = False
    divisor: Optional[torch.Tensor] = None
    grad_enabled: bool = field(default_factory=torch.is_grad_enabled)

    def record_stream(self, stream: torch.cuda.Stream) -> None:
        if self.divisor is not None:
            self.divisor.record_stream(stream)
