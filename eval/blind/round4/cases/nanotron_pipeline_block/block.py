from typing import Dict, Set

import torch
from torch import nn

from .state import PipelineBatchState


class TensorPointer:
    def __init__(self, group_rank: int):
        self.group_rank = group_rank


class PipelineBlock(nn.Module):
    def __init__(self, p2p, module_builder, module_kwargs, module_input_keys: Set[str],
                 module_output_keys: Set[str]):
        super().__init__()
        self.p2p = p2p
        self.pp_block = module_builder(**module_kwargs)
        self.module_input_keys = set(module_input_keys)
        self.module_output_keys = set(module_output_keys)
        self.rank = 0
        self.pipeline_state: PipelineBatchState = None

    def set_rank(self, rank: int):
        self.rank = rank

    def forward(self, **kwargs):
        current_rank = self.p2p.dist.get_rank(self.p2p.pg)
        if self.rank != current_rank:
            for v in kwargs.values():
                if isinstance(v, torch.Tensor):
                    self.pipeline_state.register_send_activation(v, to_rank=self.rank, p2p=self.p2p)
            return {k: TensorPointer(group_rank=self.rank) for k in self.module_output_keys}

        new_kwargs: Dict[str, torch.Tensor] = {}
        for name, tensor in kwargs.items():
            if isinstance(tensor, TensorPointer):
                new_kwargs[name] = self.p2p.recv_tensors(num_tensors=1, from_rank=tensor.group_rank)[0]
            else:
                new_kwargs[name] = tensor
        output = self.pp_block(**new_kwargs)
        if not isinstance(output, dict):
            output = {k: v for k, v in zip(sorted(self.module_output_keys), (output,))}
        for tensor in output.values():
            if isinstance(tensor, torch.Tensor) and tensor.requires_grad:
                self.pipeline_state.register_activation_requiring_backward(tensor)
        # flush queued sends: batched async isend during training, blocking one-by-one otherwise
        queued = self.pipeline_state.microbatches_activations_to_send
        if self.pipeline_state.requires_backward:
            futures = self.p2p.isend_tensors([t for t, _, _ in queued], to_rank=queued[0][1]) if queued else []
            for f in futures:
                f.wait()
        else:
            for t, to_rank, p2p in queued:
                p2p.send_tensors([t], to_rank=to_rank)
        queued.clear()
        return output
