from dataclasses import dataclass
from typing import Any, Optional


@dataclass
class LinearFwdArgs:
    is_grad_enabled: bool
    ub_overlap_ag_fprop: bool
    ub_overlap_rs_fprop: bool
    ub_name: Optional[str]
    sequence_parallel: bool
    tp_group: Any
    fp8: bool
    input_quantizer: Any = None
    weight_quantizer: Any = None
