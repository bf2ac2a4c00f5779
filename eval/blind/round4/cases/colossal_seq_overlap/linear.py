import torch
import torch.distributed as dist
import torch.nn as nn

from .shard_config import ShardConfig, sequence_overlap_active


class GPT2FusedLinearConv1D_Col(nn.Module):
    def __init__(self, in_features, out_features, shard_config: ShardConfig, bias=True, seq_parallel_dim=1):
        super().__init__()
        self.shard_config = shard_config
        self.process_group = shard_config.tensor_parallel_process_group
        world = dist.get_world_size(self.process_group)
        self.weight = nn.Parameter(torch.empty(in_features, out_features // world))
        self.bias = nn.Parameter(torch.zeros(out_features // world)) if bias else None
        self.seq_parallel_dim = seq_parallel_dim
        self._grad_hook_registered = False

    def forward(self, input_: torch.Tensor) -> torch.Tensor:
        from colossalai.shardformer.layer._operation import (
            _MatmulWithGatherForwardReduceScatterBackward,
            matmul_with_async_comm,
        )
        if torch.is_grad_enabled() and self.weight.requires_grad and not self._grad_hook_registered:
            self.weight.register_post_accumulate_grad_hook(lambda p: p.grad.div_(dist.get_world_size(self.process_group)))
            self._grad_hook_registered = True
        if self.shard_config.enable_sequence_parallelism:
            overlap = sequence_overlap_active(self.shard_config)
            ring = self.shard_config.sequence_parallelism_mode == "ring"
            output_parallel = _MatmulWithGatherForwardReduceScatterBackward.apply(
                input_, self.weight, self.bias, self.process_group, True, self.seq_parallel_dim, overlap, ring,
                self.shard_config.fp8_communication,
            )
        else:
            output_parallel = matmul_with_async_comm(input_, self.weight, self.bias, self.process_group, True)
        return output_parallel
