# adapted from facebookresearch/fairscale fairscale/nn/data_parallel/fully_sharded_data_parallel.py
import functools
from enum import Enum, auto
from typing import Any, List, Optional

import torch
from torch.autograd import Variable
import torch.distributed as dist
import torch.nn as nn
from torch.nn import Parameter

from fairscale.utils.containers import apply_to_tensors
from fairscale.utils.parallel import chunk_and_pad
from fairscale.utils.reduce_scatter_bucketer import ReduceScatterBucketer


class TrainingState(Enum):
    IDLE = auto()
    FORWARD = auto()
    BACKWARD_PRE = auto()
    BACKWARD_POST = auto()
    SUMMON_FULL_PARAMS = auto()


def cast_floats_to_right_precision(to_fp16: bool, no_grad: bool, *args: Any, **kwargs: Any):
    def fn(x: torch.Tensor) -> torch.Tensor:
        if x.dtype is torch.float32 and to_fp16:
            return x.half()
        return x

    if no_grad:
        with torch.no_grad():
            return apply_to_tensors(fn, args), apply_to_tensors(fn, kwargs)
    return apply_to_tensors(fn, args), apply_to_tensors(fn, kwargs)


def _record_grad_mode(forward_fn):
    @functools.wraps(forward_fn)
    def wrapper(self, *args: Any, **kwargs: Any):
        self._grad_mode_at_forward = torch.is_grad_enabled()
        return forward_fn(self, *args, **kwargs)

    return wrapper


class FullyShardedDataParallel(nn.Module):
    def __init__(self, module: nn.Module, process_group=None, reshard_after_forward: bool = True,
                 mixed_precision: bool = False, force_input_to_fp32: bool = False,
                 clear_autocast_cache: bool = False, bucket_cap_mb: int = 25):
        super().__init__()
        self.process_group = process_group or dist.new_group()
        self.rank = self.process_group.rank()
        self.world_size = self.process_group.size()
        self.reshard_after_forward = reshard_after_forward
        self.mixed_precision = mixed_precision
        self.force_input_to_fp32 = force_input_to_fp32
        self.clear_autocast_cache = clear_autocast_cache
        self.bucket_cap_mb = bucket_cap_mb
        self._fsdp_wrapped_module = module
        self.params: List[Parameter] = list(module.parameters())
        self._is_root: Optional[bool] = None
        self._streams = {}
        self._reducer: Optional[ReduceScatterBucketer] = None
        self.training_state = TrainingState.IDLE
        self._pre_backward_hook_has_run = False
        self._grad_mode_at_forward = True
        self.has_full_params = False

    @property
    def module(self) -> nn.Module:
        return self._fsdp_wrapped_module

    def assert_state(self, state) -> None:
        if isinstance(state, TrainingState):
            state = [state]
        if self.training_state not in state:
            raise ValueError(f"expected to be in states {state} but current state is {self.training_state}")

    @_record_grad_mode
    def forward(self, *args: Any, **kwargs: Any) -> torch.Tensor:
        self.assert_state(TrainingState.IDLE)

        self._lazy_init()

        # Start of a forward pass.
        self.training_state = TrainingState.FORWARD

        # For root and mixed precision, we convert the input to FP16 (no_grad is needed for
        # the conversion).
        if self._is_root and self.mixed_precision:
            args, kwargs = cast_floats_to_right_precision(True, True, *args, **kwargs)

        # If enabled, convert the input to FP32 if we are in full precision.
        if self.force_input_to_fp32 and not self.mixed_precision:
            args, kwargs = cast_floats_to_right_precision(False, False, *args, **kwargs)

        # All-gather full parameters. This will also transfer FP32 parameters to
        # ``self.compute_dtype`` (e.g., FP16 if *mixed_precision* is ``True``).
        self._rebuild_full_params()

        # Register backward hooks to reshard params and reduce-scatter grads.
        # These need to be re-registered every forward pass.
        self._register_post_backward_hooks()

        outputs = self.module(*args, **kwargs)

        if self.reshard_after_forward and self._grad_mode_at_forward:
            self._free_full_params()
            if self.mixed_precision:
                self._free_fp16_param_shard()

        # Switch to main FP32 param shard.
        self._use_fp32_param_shard()

        # Register pre-backward hooks to all-gather the params for the backward
        # pass (if output's grad was needed). This won't register anything if
        # we are in eval mode.
        outputs = self._register_pre_backward_hooks(outputs)

        # Done with a forward pass.
        self.training_state = TrainingState.IDLE

        if self.clear_autocast_cache:
            torch.clear_autocast_cache()

        return outputs

    def _register_pre_backward_hooks(self, outputs: Any) -> Any:
        """Register pre-backward hook to run before the wrapped module's
        backward. Hooks should be attached to all outputs from the forward.
        """
        if not torch.is_grad_enabled():
            return outputs  # don't register hooks if grad isn't enabled

        if self._is_root:
            self._post_backward_callback_queued = False

        def _pre_backward_hook(*unused: Any) -> None:
            if self._pre_backward_hook_has_run:
                return  # only run once (from multiple outputs or multiple forward passes)
            self._pre_backward_hook_has_run = True

            # Start of a backward pass.
            self.assert_state([TrainingState.IDLE, TrainingState.BACKWARD_PRE])
            self.training_state = TrainingState.BACKWARD_PRE

            # All-gather full parameters.
            if self.reshard_after_forward:
                self._rebuild_full_params()
            else:
                self._use_full_params()

        def _register_hook(t: torch.Tensor) -> torch.Tensor:
            if t.requires_grad:
                t.register_hook(_pre_backward_hook)
            return t

        # Attach hooks to Tensor outputs.
        outputs = apply_to_tensors(_register_hook, outputs)

        return outputs

    def _register_post_backward_hooks(self) -> None:
        """
        Register backward hooks to reshard params and reduce-scatter grads.
        """
        if not self._grad_mode_at_forward:
            return  # don't register grad hooks if grad isn't enabled
        for p in self.params:
            if p.requires_grad:
                if hasattr(p, "_shard_bwd_hook"):
                    continue
                p_tmp = p.expand_as(p)  # Get a grad_fn on p_tmp.
                assert p_tmp.grad_fn is not None
                grad_acc = p_tmp.grad_fn.next_functions[0][0]  # Gets its GradAccumulation object.
                handle = grad_acc.register_hook(functools.partial(self._post_backward_hook, p))
                p._shard_bwd_hook = (grad_acc, handle)

    @torch.no_grad()
    def _post_backward_hook(self, param: Parameter, *unused: Any) -> None:
        self.training_state = TrainingState.BACKWARD_POST
        if param.grad is None:
            return
        self._free_full_params([param])
        self._use_fp32_param_shard([param])
        self._streams["post_backward"].wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self._streams["post_backward"]):
            grad_chunks = chunk_and_pad(param.grad.data, self.world_size)
            self._reducer.reduce_scatter_async(grad_chunks, group=self.process_group)

    @torch.no_grad()
    def _rebuild_full_params(self, force_full_precision: bool = False):
        # Early exit if we already have full params and don't need full precision.
        if self.has_full_params and not force_full_precision:
            self._use_full_params()
            return
        self.has_full_params = True
        with torch.cuda.stream(self._streams["all_gather"]):
            for p in self.params:
                if not p._is_sharded:  # e.g., when world_size == 1
                    continue
                p_data = p.data.to(p._full_param_padded.device, non_blocking=True)
                output_tensor = p._full_param_padded
                dist._all_gather_base(output_tensor, p_data, group=self.process_group)
                p.data = output_tensor[: p._orig_size.numel()].view(p._orig_size)
        torch.cuda.current_stream().wait_stream(self._streams["all_gather"])

    @torch.no_grad()
    def _use_full_params(self) -> None:
        for p in self.params:
            if p._is_sharded:
                p.data = p._full_param_padded[: p._orig_size.numel()].view(p._orig_size)

    @torch.no_grad()
    def _free_full_params(self, params: Optional[List[Parameter]] = None) -> None:
        if params is None:
            params = self.params
        self.has_full_params = False
        current_stream = torch.cuda.current_stream()
        for p in params:
            if not p._is_sharded:
                continue
            p._full_param_padded.record_stream(current_stream)
            p._full_param_padded.storage().resize_(0)

    def _use_fp32_param_shard(self, params: Optional[List[Parameter]] = None) -> None:
        for p in params or self.params:
            p.data = p._fp32_shard

    def _free_fp16_param_shard(self, params: Optional[List[Parameter]] = None) -> None:
        for p in params or self.params:
            if p._fp16_shard is not None:
                p._fp16_shard.storage().resize_(0)

    def _lazy_init(self) -> None:
        if self._is_root is None:
            self._is_root = True
            self._streams["all_gather"] = torch.cuda.Stream()
            self._streams["post_backward"] = torch.cuda.Stream()
            self._reducer = ReduceScatterBucketer(self.bucket_cap_mb)
