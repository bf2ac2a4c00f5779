# adapted from facebookresearch/fairscale fairscale/nn/data_parallel/fully_sharded_data_parallel.py
import functools
from enum import Enum, auto
from typing import Any, List, Optional, Tuple

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parameter import Parameter

from fairscale.internal.containers import apply_to_tensors
from fairscale.internal.parallel import get_process_group_cached
from fairscale.nn.misc import FlattenParamsWrapper
from fairscale.utils.parallel import chunk_and_pad, enable_pytorch_sync_bn
from fairscale.internal.params import alloc_storage_, free_storage_


class TrainingState(Enum):
    IDLE = auto()
    FORWARD = auto()
    BACKWARD_PRE = auto()
    BACKWARD_POST = auto()
    SUMMON_FULL_PARAMS = auto()


def cast_floats_to_right_precision(to_fp16: bool, no_grad: bool, *args: Any, **kwargs: Any) -> Tuple[Any, Any]:
    def fn_fp16(x: torch.Tensor) -> torch.Tensor:
        if x.dtype is torch.float32:
            return x.half()
        return x

    with torch.no_grad() if no_grad else torch.enable_grad():
        return apply_to_tensors(fn_fp16, args), apply_to_tensors(fn_fp16, kwargs)


class FullyShardedDataParallel(nn.Module):
    """
    A wrapper for sharding Module parameters across data parallel workers.
    """

    def __init__(
        self,
        module: nn.Module,
        process_group=None,
        reshard_after_forward: bool = True,
        mixed_precision: bool = False,
        fp32_reduce_scatter: bool = False,
        flatten_parameters: bool = True,
        move_params_to_cpu: bool = False,
        compute_dtype: Optional[torch.dtype] = None,
        clear_autocast_cache: bool = False,
    ):
        super().__init__()
        self.process_group = process_group or get_process_group_cached()
        self.rank = self.process_group.rank()
        self.world_size = self.process_group.size()
        self.reshard_after_forward = reshard_after_forward
        self.mixed_precision = mixed_precision
        self.fp32_reduce_scatter = fp32_reduce_scatter
        self.move_params_to_cpu = move_params_to_cpu
        self.compute_dtype = compute_dtype or (torch.float16 if mixed_precision else torch.float32)
        self.clear_autocast_cache = clear_autocast_cache
        self._fsdp_wrapped_module: nn.Module = FlattenParamsWrapper(module, param_list=list(module.parameters()))
        self.params = list(self._fsdp_wrapped_module.parameters())
        self.training_state = TrainingState.IDLE
        self.has_full_params = False
        self._is_root: Optional[bool] = None
        self._streams = {}
        self._pre_backward_hook_has_run = False
        self._post_backward_callback_queued = False

    @property
    def module(self) -> FlattenParamsWrapper:
        return self._fsdp_wrapped_module

    def forward(self, *args: Any, **kwargs: Any) -> torch.Tensor:
        self._lazy_init()

        # Start of a forward pass.
        self.training_state = TrainingState.FORWARD

        # For root and mixed precision, we convert the input to FP16 (no_grad is needed for
        # the conversion).
        if self._is_root and self.mixed_precision:
            args, kwargs = cast_floats_to_right_precision(True, True, *args, **kwargs)

        # All-gather full parameters. This will also transfer FP32 parameters to
        # ``self.compute_dtype`` (e.g., FP16 if *mixed_precision* is ``True``).
        self._rebuild_full_params()

        # Register backward hooks to reshard params and reduce-scatter grads.
        # These need to be re-registered every forward pass.
        self._register_post_backward_hooks()

        outputs = self.module(*args, **kwargs)

        if self.reshard_after_forward and torch.is_grad_enabled():
            self._free_full_params()
            if self.mixed_precision or self.move_params_to_cpu:
                self._free_fp16_param_shard()

        # Switch to main FP32 param shard. We maintain this invariant throughout
        # the code, i.e., ``p.data == p._fp32_shard`` after each function.
        self._use_fp32_param_shard()

        # Register pre-backward hooks to all-gather the params for the backward
        # pass (if output's grad was needed).
        outputs = self._register_pre_backward_hooks(outputs)

        # Done with a forward pass.
        self.training_state = TrainingState.IDLE

        if self.clear_autocast_cache:
            torch.clear_autocast_cache()

        return outputs

    def _register_pre_backward_hooks(self, outputs: Any) -> Any:
        """Register pre-backward hook to run before the wrapped module's
        backward. Hooks should be attached to all outputs from the forward."""
        if not torch.is_grad_enabled():
            return outputs  # don't register hooks if grad isn't enabled

        if self._is_root:
            self._post_backward_callback_queued = False

        def _pre_backward_hook(*unused: Any) -> None:
            if self._pre_backward_hook_has_run:
                return
            self._pre_backward_hook_has_run = True
            self.training_state = TrainingState.BACKWARD_PRE
            if self.reshard_after_forward:
                self._rebuild_full_params()
            else:
                self._use_full_params()
            self._prep_grads_for_backward()

        def _register_hook(t: torch.Tensor) -> torch.Tensor:
            if t.requires_grad:
                t.register_hook(_pre_backward_hook)
            return t

        return apply_to_tensors(_register_hook, outputs)

    def _register_post_backward_hooks(self) -> None:
        """Register backward hooks to reshard params and reduce-scatter grads."""
        if not torch.is_grad_enabled() or not self.params:
            return  # don't register grad hooks if grad isn't enabled
        for p in self.params:
            if p.requires_grad:
                if hasattr(p, "_shard_bwd_hook"):
                    continue
                p_tmp = p.expand_as(p)
                assert p_tmp.grad_fn is not None
                grad_acc = p_tmp.grad_fn.next_functions[0][0]
                handle = grad_acc.register_hook(functools.partial(self._post_backward_hook, p))
                p._shard_bwd_hook = (grad_acc, handle)

    @torch.no_grad()
    def _post_backward_hook(self, param: Parameter, *unused: Any) -> None:
        if param.grad is None:
            return
        self.training_state = TrainingState.BACKWARD_POST
        if self.reshard_after_forward:
            self._free_full_params([param])

    @torch.no_grad()
    def _rebuild_full_params(self, force_full_precision: bool = False) -> Optional[List[Tuple[torch.Tensor, bool]]]:
        """Gather all shards of params."""
        output_tensors: List[Tuple[torch.Tensor, bool]] = []
        if self.has_full_params and not force_full_precision:
            for p in self.params:
                p.data = p._full_param_padded[: p._orig_size.numel()].view(p._orig_size)
            return output_tensors

        self.has_full_params = True
        with torch.cuda.stream(self._streams["all_gather"]):
            if self.mixed_precision and not force_full_precision:
                self._cast_fp32_param_shards_to_fp16()
            for p in self.params:
                if not p._is_sharded:
                    continue
                p_data = p.data.to(p._full_param_padded.device, non_blocking=True)
                p_size = p._full_param_padded.size()
                if p._full_param_padded.storage().size() != p_size.numel():
                    alloc_storage_(p._full_param_padded, size=p_size)
                output_tensor = p._full_param_padded
                dist._all_gather_base(output_tensor, p_data, group=self.process_group)
                p.data = output_tensor[: p._orig_size.numel()].view(p._orig_size)
                output_tensors.append((p.data, True))
        torch.cuda.current_stream().wait_stream(self._streams["all_gather"])
        return output_tensors

    @torch.no_grad()
    def _use_full_params(self) -> None:
        assert self.has_full_params
        for p in self.params:
            if p._is_sharded:
                p.data = p._full_param_padded[: p._orig_size.numel()].view(p._orig_size)

    @torch.no_grad()
    def _prep_grads_for_backward(self) -> None:
        for p in self.params:
            if p.grad is not None and (p.grad.size() != p._orig_size or p.grad.device != p.data.device):
                p.grad = None

    @torch.no_grad()
    def _free_full_params(self, params: Optional[List[Parameter]] = None) -> None:
        """Free up storage for full parameters."""
        if params is None:
            params = self.params
        self.has_full_params = False
        current_stream = torch.cuda.current_stream()
        for p in params:
            if not p._is_sharded:
                continue
            p._full_param_padded.record_stream(current_stream)
            free_storage_(p._full_param_padded)

    @torch.no_grad()
    def _use_fp32_param_shard(self, params: Optional[List[Parameter]] = None) -> None:
        if params is None:
            params = self.params
        for p in params:
            p.data = p._fp32_shard

    @torch.no_grad()
    def _free_fp16_param_shard(self, params: Optional[List[Parameter]] = None) -> None:
        if params is None:
            params = self.params
        current_stream = torch.cuda.current_stream()
        for p in params:
            if p._fp16_shard is not None:
                p._fp16_shard.record_stream(current_stream)
                free_storage_(p._fp16_shard)

    def _lazy_init(self) -> None:
        if self._is_root is None:
            self._is_root = True
            self._streams["all_gather"] = torch.cuda.Stream()
            self._streams["post_backward"] = torch.cuda.Stream()
