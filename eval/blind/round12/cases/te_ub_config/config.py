# adapted from NVIDIA/TransformerEngine transformer_engine/pytorch/module/layernorm_mlp.py
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class ForwardCommConfig:
    overlap_ag: bool = False
    overlap_rs: bool = False
    save_for_backward: bool = True
    sequence_parallel: bool = False

    @classmethod
    def from_module(cls, module) -> "ForwardCommConfig":
        grad = torch.is_grad_enabled()
        return cls(
            overlap_ag=module.ub_overlap_ag and grad,
            overlap_rs=module.ub_overlap_rs and grad,
            save_for_backward=grad and module.weight.requires_grad,
            sequence_parallel=module.sequence_parallel,
        )
