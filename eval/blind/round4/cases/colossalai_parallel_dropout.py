# Modeled on ColossalAI colossalai/shardformer/layer/dropout.py
# (DropoutForParallelInput / DropoutForReplicatedInput with a seeded randomizer).
from typing import List, Union

import torch
import torch.nn as nn
import torch.nn.functional as F


class ParallelModule(nn.Module):
    pass


class SeedManagerMixin:
    # probe used to decide whether dropout is "live" in this forward
    _dropout_live = staticmethod(torch.is_grad_enabled)

    def _init_randomizer(self, process_group=None, seed=1024):
        from colossalai.shardformer.layer.utils import create_randomizer_with_offset
        self.randomizer = create_randomizer_with_offset(seed, process_group=process_group)


class DropoutForParallelInput(SeedManagerMixin, ParallelModule, nn.Dropout):
    def __init__(self, p: float = 0.5, inplace: bool = False, process_group=None):
        nn.Dropout.__init__(self, p=p, inplace=inplace)
        self.process_group = process_group
        self._init_randomizer(process_group)

    @staticmethod
    def from_native_module(module: nn.Dropout, process_group=None, *args, **kwargs):
        return DropoutForParallelInput(p=module.p, inplace=module.inplace, process_group=process_group)

    def forward(self, input):
        with self.randomizer.fork_rng():
            return F.dropout(input, self.p, self._dropout_live(), self.inplace)


class DropoutForReplicatedInput(SeedManagerMixin, ParallelModule, nn.Dropout):
    def __init__(self, p: float = 0.5, inplace: bool = False, process_group=None):
        nn.Dropout.__init__(self, p=p, inplace=inplace)
        self.process_group = process_group
        self._init_randomizer(process_group)

    def forward(self, input):
        # replicated input: same mask on every rank, real train/eval switch
        with self.randomizer.fork_rng():
            return F.dropout(input, self.p, self.training, self.inplace)
