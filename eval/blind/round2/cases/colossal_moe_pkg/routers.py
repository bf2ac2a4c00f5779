# Modelled on ColossalAI colossalai/nn/layer/moe/routers.py
import math
from abc import ABC
from typing import Callable, Optional

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed import ProcessGroup

from colossalai.context import MOE_CONTEXT
from colossalai.nn.layer.moe._operation import moe_cumsum


class MoeRouter(nn.Module, ABC):
    """Base class for all MoE routers.
    Args:
        k_value (int): The value of top_k.
        capacity_factor_train (float): Capacity factor in routing of training.
        capacity_factor_eval (float): Capacity factor in routing of evaluation.
        min_capacity (int): The minimum number of the capacity of each expert.
        noisy_func (:class:`typing.Callable`, optional): Noisy function used in logits.
        drop_tks (bool, optional): Whether drops tokens in evaluation
    """

    def __init__(self, k_value: int, capacity_factor_train: float, capacity_factor_eval: float, min_capacity: int,
                 noisy_func: Optional[Callable] = None, drop_tks: bool = True):
        super().__init__()
        self.k_value = k_value
        self.capacity_factor_train = capacity_factor_train
        self.capacity_factor_eval = capacity_factor_eval
        self.min_capacity = min_capacity
        self.noisy_func = noisy_func
        self.drop_tks = drop_tks
        self._aux_loss = None

    def get_capacity(self, logits_shape, grad_on: bool = True):
        capacity_factor = self.capacity_factor_train if grad_on else self.capacity_factor_eval
        capacity = math.floor(self.k_value * capacity_factor * logits_shape[-2] / logits_shape[-1])
        capacity += capacity % 2
        capacity = max(capacity, self.min_capacity)
        assert capacity > 0
        return capacity

    def set_aux_loss(self, num_experts: int, me: torch.Tensor, ce: torch.Tensor):
        self._aux_loss = num_experts * torch.sum(me * ce)

    def pop_router_loss(self) -> torch.Tensor:
        if self._aux_loss is None:
            return torch.zeros(())
        out = self._aux_loss
        self._aux_loss = None
        return out


class Top1Router(MoeRouter):
    def __init__(self, capacity_factor_train: float = 1.25, capacity_factor_eval: float = 2.0, min_capacity: int = 4,
                 select_policy: str = "first", noisy_func: Optional[Callable] = None, drop_tks: bool = True):
        super().__init__(k_value=1, capacity_factor_train=capacity_factor_train,
                         capacity_factor_eval=capacity_factor_eval, min_capacity=min_capacity,
                         noisy_func=noisy_func, drop_tks=drop_tks)
        self.select_policy = select_policy

    def forward(self, inputs: torch.Tensor, use_kernel: bool = False, ep_group: Optional[ProcessGroup] = None,
                grad_on: bool = True):
        if self.noisy_func is not None and grad_on:
            inputs = self.noisy_func(inputs)

        assert inputs.dtype == torch.float
        logits = F.softmax(inputs, dim=-1)
        num_experts = logits.size(-1)
        capacity = self.get_capacity(logits.shape, grad_on=grad_on)

        top1_idx = torch.argmax(inputs, dim=-1)
        mask = F.one_hot(top1_idx, num_classes=num_experts).to(torch.int32)

        # calculate the auxiliary loss (popped by the training loop and added to the loss)
        if grad_on:
            self.set_aux_loss(num_experts, torch.mean(logits, dim=0), torch.mean(mask.float(), dim=0))

        if not grad_on and not self.drop_tks:
            max_num = torch.max(torch.sum(mask, dim=0))
            dist.all_reduce(max_num, op=dist.ReduceOp.MAX, group=ep_group)
            capacity = max_num.item()

        ranks = moe_cumsum(mask)
        mask = mask * torch.lt(ranks, capacity)
        ranks = torch.sum(mask * ranks, dim=-1)

        if use_kernel:
            mask = torch.sum(mask, dim=-1)
            mask = torch.stack([mask], dim=0).to(torch.int32)
            dest_idx = torch.stack([top1_idx * capacity + ranks], dim=0).to(torch.int32)
            return logits, mask, dest_idx, num_experts * capacity
        ranks = F.one_hot(ranks, num_classes=capacity)
        weight = mask * logits.type_as(inputs)
        combine_weights = weight.unsqueeze(2) * ranks.unsqueeze(1)
        sec_mask = combine_weights.bool()
        return combine_weights, sec_mask
