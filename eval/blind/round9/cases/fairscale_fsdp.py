import functools
from enum import Enum, auto
from typing import Any, Dict, List, Optional

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parameter import Parameter

from fairscale.internal.containers import apply_to_tensors
from fairscale.internal.parallel import chunk_and_pad


class TrainingState(Enum):
    IDLE = auto()
    FORWARD = auto()
    PRE_BACKWARD = auto()
    BACKWARD_PRE = auto()


class FullyShardedDataParallel(nn.Module):
    def __init__(self, module: nn.Module, process_group=None, reshard_after_forward: bool = True,
                 mixed_precision: bool = False, compute_dtype: Optional[torch.dtype] = None):
        super().__init__()
        self.module = module
        self.process_group = process_group or dist.group.WORLD
        self.rank = self.process_group.rank()
        self.world_size = self.process_group.size()
        self.reshard_after_forward = reshard_after_forward
        self.mixed_precision = mixed_precision
        self.compute_dtype = compute_dtype or (torch.float16 if mixed_precision else torch.float32)
        self.params: List[Parameter] = [p for p in module.parameters()]
        self._streams: Dict[str, torch.cuda.Stream] = {}
        self._is_root: Optional[bool] = None
        self.training_state = TrainingState.IDLE

    def _init_streams(self) -> None:
        self._streams["all_gather"] = torch.cuda.Stream()
        self._streams["post_backward"] = torch.cuda.Stream()

    def _all_gather_stream(self) -> torch.cuda.Stream:
        return self._streams["all_gather"] if torch.is_grad_enabled() else torch.cuda.current_stream()

    def _rebuild_full_params(self, force_full_precision: bool = False) -> None:
        stream = self._all_gather_stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.no_grad(), torch.cuda.stream(stream):
            for p in self.params:
                if self.world_size == 1:
                    p.data = p._fp32_shard
                    continue
                p_size = p._full_param_padded.size()
                if p._full_param_padded.storage().size() != p_size.numel():
                    p._full_param_padded.storage().resize_(p_size.numel())
                output_tensor = p._full_param_padded
                dist._all_gather_base(output_tensor, p.data, group=self.process_group)
                p.data = output_tensor[: p._orig_size.numel()].view(p._orig_size)
        torch.cuda.current_stream().wait_stream(stream)

    @torch.no_grad()
    def _free_full_params(self, params: Optional[List[Parameter]] = None) -> None:
        for p in params or self.params:
            if self.world_size > 1:
                p._full_param_padded.record_stream(torch.cuda.current_stream())
                p._full_param_padded.storage().resize_(0)
            p.data = p._fp32_shard

    def _register_pre_backward_hooks(self, outputs: Any) -> Any:
        if not torch.is_grad_enabled():
            return outputs

        def _pre_backward_hook(*unused: Any) -> None:
            self._rebuild_full_params()
            self.training_state = TrainingState.BACKWARD_PRE

        def _register_hook(t: torch.Tensor) -> torch.Tensor:
            if t.requires_grad:
                t.register_hook(_pre_backward_hook)
            return t

        return apply_to_tensors(_register_hook, outputs)

    def forward(self, *args: Any, **kwargs: Any) -> torch.Tensor:
        if not self._streams:
            self._init_streams()
        self.training_state = TrainingState.FORWARD
        self._rebuild_full_params()
        outputs = self.module(*args, **kwargs)
        if self.reshard_after_forward:
            self._free_full_params()
        outputs = self._register_pre_backward_hooks(outputs)
        self.training_state = TrainingState.IDLE
        return outputs
