from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class MicroBatchMeta:
    temperature: float
    calculate_entropy: bool
    needs_backward: bool
    response_length: int


def build_meta(micro_batch, temperature: float, calculate_entropy: bool) -> MicroBatchMeta:
    return MicroBatchMeta(
        temperature=temperature,
        calculate_entropy=calculate_entropy,
        needs_backward=torch.is_grad_enabled(),
        response_length=micro_batch["responses"].size(-1),
    )
