# adapted from databricks/megablocks megablocks/layers/moe.py (Arguments fields used by MoE)
import dataclasses
from typing import Any, Optional

import torch


@dataclasses.dataclass
class Arguments:
    hidden_size: int = 1024
    ffn_hidden_size: int = 4096
    moe_num_experts: int = 1
    moe_top_k: int = 1
    moe_capacity_factor: int = 1
    moe_loss_weight: float = 0.1
    moe_expert_model_parallelism: bool = False
    expert_parallel_group: Optional[Any] = None
    device: torch.device = torch.device("cuda")

    @property
    def ep_forward(self) -> bool:
        return self.moe_expert_model_parallelism and torch.is_grad_enabled()

    @property
    def track_lbl(self) -> bool:
        return self.moe_loss_weight > 0 and torch.is_grad_enabled()
