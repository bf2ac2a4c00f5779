import torch
from torch.nn import Module

from .comm import _SeqAllToAll


class DistributedAttention(Module):
    def __init__(self, local_attention, sequence_process_group, scatter_idx=2, gather_idx=0,
                 sp_stream=None):
        super().__init__()
        self.local_attn = local_attention
        self.spg = sequence_process_group
        self.scatter_idx = scatter_idx
        self.gather_idx = gather_idx
        self.sp_overlap_comm = sp_stream is not None
        self.sp_stream = sp_stream
        self.overlap_handles = {} if self.sp_overlap_comm else None

    def forward(self, query, key, value, batch_dim_idx, rotary_pos_emb=None, *args, **kwargs):
        is_grad = torch.is_grad_enabled()
        if self.sp_overlap_comm and is_grad:
            def bwd_hook(layer_type):
                def pre_hook_fun(grad):
                    self.overlap_handles[layer_type + "_grad"] = grad
                    return grad
                return pre_hook_fun
            query.register_hook(bwd_hook("q"))
            key.register_hook(bwd_hook("k"))

        query_layer = _SeqAllToAll.apply(self.spg, query, self.scatter_idx, self.gather_idx, batch_dim_idx,
                                         self.sp_stream, self.overlap_handles, "q", True, is_grad)
        key_layer = _SeqAllToAll.apply(self.spg, key, self.scatter_idx, self.gather_idx, batch_dim_idx,
                                       self.sp_stream, self.overlap_handles, "k", True, is_grad)
        value_layer = _SeqAllToAll.apply(self.spg, value, self.scatter_idx, self.gather_idx, batch_dim_idx,
                                         None, None, "v", True, is_grad)
        if self.sp_overlap_comm and is_grad:
            for t in ("fwd_q", "fwd_k"):
                self.overlap_handles[t].wait()
        context_layer = self.local_attn(query_layer, key_layer, value_layer, *args, **kwargs)
        output = _SeqAllToAll.apply(self.spg, context_layer, self.gather_idx, self.scatter_idx, batch_dim_idx,
                                    None, None, "o", True, is_grad)
        return output
