# Adapted from deepspeedai/DeepSpeed deepspeed/sequence/layer.py (DistributedAttention.forward, _SeqAllToAll).
from typing import Any

import torch
import torch.distributed as dist
from torch import Tensor
from torch.nn import Module

from deepspeed.accelerator import get_accelerator
from deepspeed.sequence.layer import _SeqAllToAll


class DistributedAttention(Module):
    def __init__(self, local_attention: Module, sequence_process_group: dist.ProcessGroup,
                 scatter_idx: int = 2, gather_idx: int = 0, sp_stream=None) -> None:
        super().__init__()
        self.local_attn = local_attention
        self.spg = sequence_process_group
        self.scatter_idx = scatter_idx
        self.gather_idx = gather_idx
        self.sp_overlap_comm = False
        self.overlap_handles = None
        self.sp_stream = sp_stream
        if sp_stream is not None:
            self.overlap_handles = {}
            self.sp_overlap_comm = True
            self.default_stream = get_accelerator().default_stream()

    def layer_sync(self, layer):
        if self.sp_overlap_comm and hasattr(layer, 'done_event'):
            self.default_stream.wait_event(layer.done_event)

    def forward(self, query: Tensor, key: Tensor, value: Tensor, batch_dim_idx: int, *args: Any, **kwargs) -> Tensor:

        def bwd_hook(layer_type):
            def pre_hook_fun(grad):
                type = 'd' + layer_type
                self.overlap_handles[type + '_work'].wait()
                self.sp_stream.wait_stream(self.default_stream)
                grad = list(grad)
                grad[0] = self.overlap_handles[type + '_post_all2all_func'](self.overlap_handles[type + '_grad'])
                return tuple(grad)
            return pre_hook_fun

        handles = self.overlap_handles if torch.is_grad_enabled() else None
        self.layer_sync(query)
        query_layer = _SeqAllToAll.apply(self.spg, query, self.scatter_idx, self.gather_idx, batch_dim_idx, None,
                                         handles, 'q')
        self.layer_sync(key)
        key_layer = _SeqAllToAll.apply(self.spg, key, self.scatter_idx, self.gather_idx, batch_dim_idx, None,
                                       handles, 'k')
        if self.sp_overlap_comm:
            self.default_stream.wait_stream(self.sp_stream)
        value_layer = _SeqAllToAll.apply(self.spg, value, self.scatter_idx, self.gather_idx, batch_dim_idx, None,
                                         handles, 'v')

        if self.sp_overlap_comm and torch.is_grad_enabled():
            grad_fn_q = query.grad_fn.next_functions[0][0]
            grad_fn_q.register_prehook(bwd_hook(layer_type='q'))
            grad_fn_k = key.grad_fn.next_functions[0][0]
            grad_fn_k.register_prehook(bwd_hook(layer_type='k'))

        context_layer = self.local_attn(query_layer, key_layer, value_layer, *args, **kwargs)
        output = _SeqAllToAll.apply(self.spg, context_layer, self.gather_idx, self.scatter_idx, batch_dim_idx,
                                    self.sp_stream, self.overlap_handles, 'o')
        return output
