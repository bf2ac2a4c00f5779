from typing import Any, Dict, List, Optional, Tuple

import torch
import torch.distributed as dist


class PipelineStage:
    def __init__(self, submodule, stage_index: int, num_stages: int, device, group=None):
        self.submod = submodule
        self.stage_index = stage_index
        self.num_stages = num_stages
        self.device = device
        self.group = group
        self.fwd_cache: Dict[int, Tuple[Any, List[torch.Tensor]]] = {}
        self.output_chunks: List[Any] = []
        self._outputs: Dict[int, Tuple[torch.Tensor, ...]] = {}

    @property
    def is_first(self):
        return self.stage_index == 0

    @property
    def is_last(self):
        return self.stage_index == self.num_stages - 1

    def forward_one_chunk(self, fwd_chunk_id: int, args: Tuple[Any, ...], kwargs: Optional[Dict[str, Any]] = None):
        kwargs = kwargs or {}
        output = self.submod(*args, **kwargs)
        output_tuple = output if isinstance(output, tuple) else (output,)
        self._outputs[fwd_chunk_id] = output_tuple
        flatten_input_tensors = [a for a in list(args) + list(kwargs.values()) if torch.is_tensor(a)]
        # Save activations and inputs for backward
        if torch.is_grad_enabled():
            self.fwd_cache[fwd_chunk_id] = (output_tuple, flatten_input_tensors)
        if self.is_last:
            self.output_chunks.append(output)
        return output

    def get_fwd_send_ops(self, fwd_chunk_id: int) -> List[dist.P2POp]:
        if self.is_last:
            return []
        peer = dist.get_global_rank(self.group, self.stage_index + 1) if self.group else self.stage_index + 1
        return [dist.P2POp(dist.isend, t, peer, self.group) for t in self._outputs[fwd_chunk_id]]

    def get_fwd_recv_ops(self, fwd_chunk_id: int) -> List[dist.P2POp]:
        return []
