import functools
from typing import Any, Dict, List, Optional

import torch
import torch.nn as nn
from torch.nn import Parameter

from fairscale.internal.containers import apply_to_tensors
from fairscale.internal.parallel import chunk_and_pad


class FullyShardedDataParallel(nn.Module):
    def __init__(self, module: nn.Module, process_group=None, reshard_after_forward: bool = True):
        super().__init__()
        self.module = module
        self.process_group = process_group
        self.reshard_after_forward = reshard_after_forward
        self.params: List[Parameter] = [p for p in module.parameters()]
        self._streams: Dict[str, torch.cuda.Stream] = {}
        self._output_pre_backward_hook_registered: Optional[List] = None
        self._pre_backward_hook_has_run = False

    def _init_streams(self):
        self._streams["all_gather"] = torch.cuda.Stream()
        self._streams["post_backward"] = torch.cuda.Stream()

    def _rebuild_full_params(self, force_full_precision: bool = False):
        grad_mode = torch.is_grad_enabled()
        gather_stream = self._streams["all_gather"] if grad_mode else torch.cuda.current_stream()
        output_tensors = []
        with torch.cuda.stream(gather_stream):
            for p in self.params:
                p_size = p._full_param_padded.size()
                if p._full_param_padded.storage().size() != p_size.numel():
                    p._full_param_padded.storage().resize_(p_size.numel())
                torch.distributed.all_gather_into_tensor(p._full_param_padded, p.data, group=self.process_group)
                output_tensors.append((p._full_param_padded[: p._orig_size.numel()].view(p._orig_size), True))
        torch.cuda.current_stream().wait_stream(gather_stream)
        return output_tensors

    def _register_pre_backward_hooks(self, outputs: Any) -> Any:
        if not torch.is_grad_enabled():
            return outputs
        if self._output_pre_backward_hook_registered is None:
            self._output_pre_backward_hook_registered = []

        def _pre_backward_hook(*unused: Any) -> None:
            if self._pre_backward_hook_has_run:
                return
            self._rebuild_full_params()
            self._pre_backward_hook_has_run = True

        def _register_hook(t: torch.Tensor) -> torch.Tensor:
            if t.requires_grad:
                t.register_hook(_pre_backward_hook)
                self._output_pre_backward_hook_registered.append(t)
            return t

        return apply_to_tensors(_register_hook, outputs)

    def forward(self, *args: Any, **kwargs: Any) -> torch.Tensor:
        self._rebuild_full_params()
        outputs = self.module(*args, **kwargs)
        if self.reshard_after_forward:
            self._free_full_params()
        outputs = self._register_pre_backward_hooks(outputs)
        return outputs

    def _free_full_params(self):
        for p in self.params:
            p._full_param_padded.storage().resize_(0)
