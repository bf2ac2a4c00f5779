# adapted from Ace1928/eidosian_forge archive_forge/code/func__delayed_all_reduce_hook.py
import torch

from ..modules import Module
from .buffers import sync_module_states_if
from .reducer import ReducerState


class DistributedDataParallel(Module):
    def forward(self, *inputs, **kwargs):
        grad = torch.is_grad_enabled()
        self._reducer_state.prepare(grad)
        sync_module_states_if(self, grad)
        return self.module(*inputs, **kwargs)
