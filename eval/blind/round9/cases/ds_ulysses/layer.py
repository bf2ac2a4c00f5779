from typing import Any, Dict

import torch
import torch.distributed as dist
from torch.nn import Module

from .comm import _SeqAllToAll
from .config import SequenceParallelConfig


class DistributedAttention(Module):
    def __init__(self, local_attention: Module, sequence_process_group: dist.ProcessGroup,
                 config: SequenceParallelConfig) -> None:
        super().__init__()
        self.local_attn = local_attention
        self.spg = sequence_process_group
        self.config = config
        self.overlap_handles: Dict[str, Any] = {}

    def _bwd_hook(self, layer_type: str):
        def pre_hook(*notneeded):
            self.config.sp_stream.wait_stream(torch.cuda.current_stream())

        return pre_hook

    def _wait(self, key: str, tensor: torch.Tensor) -> torch.Tensor:
        if key not in self.overlap_handles:
            return tensor
        work, post_fn, output = self.overlap_handles.pop(key)
        work.wait()
        torch.cuda.current_stream().wait_stream(self.config.sp_stream)
        return post_fn(output)

    def forward(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                batch_dim_idx: int = 0, *args: Any, **kwargs: Any) -> torch.Tensor:
        cfg = self.config
        grad_enabled = torch.is_grad_enabled()
        if cfg.sp_overlap_comm and grad_enabled:
            query.register_hook(self._bwd_hook("q"))
            key.register_hook(self._bwd_hook("k"))

        query_layer = _SeqAllToAll.apply(self.spg, query, cfg.scatter_idx, cfg.gather_idx, batch_dim_idx,
                                         cfg.sp_overlap_comm, grad_enabled, cfg.sp_stream,
                                         self.overlap_handles, "q")
        key_layer = _SeqAllToAll.apply(self.spg, key, cfg.scatter_idx, cfg.gather_idx, batch_dim_idx,
                                       cfg.sp_overlap_comm, grad_enabled, cfg.sp_stream,
                                       self.overlap_handles, "k")
        value_layer = _SeqAllToAll.apply(self.spg, value, cfg.scatter_idx, cfg.gather_idx, batch_dim_idx)

        query_layer = self._wait("q", query_layer)
        key_layer = self._wait("k", key_layer)
        context_layer = self.local_attn(query_layer, key_layer, value_layer, *args, **kwargs)
        output = _SeqAllToAll.apply(self.spg, context_layer, cfg.gather_idx, cfg.scatter_idx, batch_dim_idx)
        return output
