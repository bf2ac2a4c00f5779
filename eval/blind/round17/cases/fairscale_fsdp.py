# adapted from facebookresearch/fairscale fairscale/nn/data_parallel/fully_sharded_data_parallel.py
import contextlib
from typing import Any, Dict, List, Optional

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn import Parameter

from fairscale.nn.misc import FlattenParamsWrapper
from fairscale.utils.containers import apply_to_tensors
from fairscale.utils.parallel import chunk_and_pad, enable_pytorch_sync_bn


class TrainingState:
    IDLE = "idle"
    FORWARD = "forward"
    BACKWARD_PRE = "backward_pre"


class FullyShardedDataParallel(nn.Module):
    def __init__(self, module: nn.Module, process_group=None, reshard_after_forward: bool = True,
                 mixed_precision: bool = False, move_params_to_cpu: bool = False):
        super().__init__()
        self.process_group = process_group or dist.new_group()
        self.reshard_after_forward = reshard_after_forward
        self.mixed_precision = mixed_precision
        self.move_params_to_cpu = move_params_to_cpu
        self.module = FlattenParamsWrapper(module)
        self.params = list(self.module.parameters())
        self.training_state = TrainingState.IDLE
        self._fsdp_forward_ordering: List[nn.Module] = []
        self._streams: Dict[str, torch.cuda.Stream] = {}
        self._is_root: Optional[bool] = None

    def _rebuild_full_params(self, force_full_precision: bool = False) -> Optional[List]:
        """All-gather the shards, on the dedicated all-gather stream when overlapping."""
        output_tensors: List = []
        stream = self._streams["all_gather"] if torch.is_grad_enabled() else torch.cuda.current_stream()
        with torch.cuda.stream(stream):
            for p in self.params:
                if not p._is_sharded:
                    continue
                p_size = p._full_param_padded.size()
                p._full_param_padded.storage().resize_(p_size.numel())
                p_data = p.data.to(p._full_param_padded.device, non_blocking=True)
                dist.all_gather_into_tensor(p._full_param_padded, p_data, group=self.process_group)
                p.data = p._full_param_padded[: p._orig_size.numel()].view(p._orig_size)
                output_tensors.append((p.data, True))
        torch.cuda.current_stream().wait_stream(stream)
        return output_tensors

    def forward(self, *args: Any, **kwargs: Any) -> torch.Tensor:
        self._lazy_init()

        # Start of a forward pass.
        self.training_state = TrainingState.FORWARD

        # The ordering is replayed by later forwards to prefetch the next instance.
        if torch.is_grad_enabled() and self not in self._fsdp_forward_ordering:
            self._my_fsdp_instance_idx = len(self._fsdp_forward_ordering)
            self._fsdp_forward_ordering.append(self)

        # All-gather full parameters. This will also transfer FP32 parameters to
        # ``self.compute_dtype`` (e.g., FP16 if *mixed_precision* is ``True``).
        self._rebuild_full_params()

        outputs = self.module(*args, **kwargs)

        if self.reshard_after_forward:
            self._free_full_params()
            if self.mixed_precision or self.move_params_to_cpu:
                self._free_fp16_param_shard()

        self._use_fp32_param_shard()

        # Register pre-backward hooks to all-gather the params for the backward
        # pass (if output's grad was needed). This won't register anything if
        # we are in eval mode.
        outputs = self._register_pre_backward_hooks(outputs)

        # Done with a forward pass.
        self.training_state = TrainingState.IDLE
        return outputs

    def _register_pre_backward_hooks(self, outputs: Any) -> Any:
        """Register pre-backward hook to run before the wrapped module's
        backward. Hooks should be attached to all outputs from the forward.
        """
        if not torch.is_grad_enabled():
            return outputs  # don't register hooks if grad isn't enabled

        if self._is_root:
            # This actually means that only root instance has
            # _post_backward_callback_queued defined. Accidentally accessing this field
            # will assert on all other instances, giving us a nice bug checker.
            self._post_backward_callback_queued = False

        def _pre_backward_hook(*unused: Any) -> None:
            self.training_state = TrainingState.BACKWARD_PRE
            self._rebuild_full_params()

        def _register_hook(t: torch.Tensor) -> torch.Tensor:
            if t.requires_grad:
                t.register_hook(_pre_backward_hook)
            return t

        # Attach hooks to Tensor outputs.
        outputs = apply_to_tensors(_register_hook, outputs)
        return outputs
