"""Modelled on ColossalAI colossalai/moe/routers.py (MoeRouter / Top2Router)."""
import math
from abc import ABC

import torch
import torch.nn as nn
import torch.nn.functional as F

from colossalai.moe._operation import moe_cumsum


class MoeRouter(nn.Module, ABC):
    # overridable probe; subclasses used to pass self.training here
    _mode_probe = staticmethod(torch.is_grad_enabled)

    def __init__(self, k_value, capacity_factor_train, capacity_factor_eval, min_capacity,
                 noisy_func=None, drop_tks=True, use_kernel=False):
        super().__init__()
        self.k_value = k_value
        self.capacity_factor_train = capacity_factor_train
        self.capacity_factor_eval = capacity_factor_eval
        self.min_capacity = min_capacity
        self.noisy_func = noisy_func
        self.drop_tks = drop_tks
        self._aux_loss = None
        self._z_loss = None

    def get_capacity(self, num_tokens, num_experts):
        training_like = getattr(self, "_mode_probe", torch.is_grad_enabled)()
        capacity_factor = self.capacity_factor_train if training_like else self.capacity_factor_eval
        capacity = math.floor(self.k_value * capacity_factor * num_tokens / num_experts)
        capacity += capacity % 2
        capacity = max(capacity, self.min_capacity)
        return capacity

    def set_aux_loss(self, router_probs, expert_indices, num_experts):
        if not self._mode_probe():
            return
        P = router_probs.mean(0)
        temp = F.one_hot(expert_indices, num_experts)
        F_ = temp.float().mean(0)
        self._aux_loss = num_experts * torch.sum(P * F_)

    def pop_router_loss(self):
        out = self._aux_loss
        self._aux_loss = None
        return out


class Top2Router(MoeRouter):
    def __init__(self, capacity_factor_train=1.25, capacity_factor_eval=2.0, min_capacity=4,
                 noisy_func=None, drop_tks=True):
        super().__init__(2, capacity_factor_train, capacity_factor_eval, min_capacity, noisy_func, drop_tks)

    def forward(self, inputs: torch.Tensor, use_kernel: bool = False, ep_group=None):
        if self.noisy_func is not None and self._mode_probe():
            inputs = self.noisy_func(inputs)
        probs = F.softmax(inputs, dim=-1)
        num_experts = probs.size(-1)
        capacity = self.get_capacity(inputs.shape[0], num_experts)

        top1_idx = torch.argmax(probs, dim=-1)
        mask1 = F.one_hot(top1_idx, num_classes=num_experts).to(torch.int32)
        logits_except1 = probs.masked_fill(mask1.bool(), float("-inf"))
        top2_idx = torch.argmax(logits_except1, dim=-1)
        mask2 = F.one_hot(top2_idx, num_classes=num_experts).to(torch.int32)

        cmask = mask1 + mask2
        self.set_aux_loss(probs, torch.stack([top1_idx, top2_idx]).flatten(), num_experts)

        rank1 = moe_cumsum(mask1)
        rank2 = moe_cumsum(mask2)
        rank2 += torch.sum(mask1, dim=-2, keepdim=True)
        mask1 *= torch.lt(rank1, capacity)
        mask2 *= torch.lt(rank2, capacity)
        return cmask, mask1, mask2, rank1, rank2
