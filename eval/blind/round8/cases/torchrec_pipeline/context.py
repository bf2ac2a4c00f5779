from dataclasses import dataclass, field
from typing import Any, Dict, Optional

import torch


@dataclass
class TrainPipelineContext:
    grad_enabled: bool
    data_dist_stream: Optional[torch.cuda.Stream] = None
    input_dist_tensors_requests: Dict[str, Any] = field(default_factory=dict)
    module_contexts: Dict[str, Any] = field(default_factory=dict)
    index: int = 0
