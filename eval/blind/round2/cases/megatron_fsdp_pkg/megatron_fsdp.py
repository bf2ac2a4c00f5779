# Modelled on Megatron-LM megatron/core/distributed/fsdp/src/megatron_fsdp/megatron_fsdp.py
from typing import Any, Dict, Tuple

import torch
import torch.nn as nn

from .param_and_grad_buffer import AllGatherPipeline, PrefetchOrder
from .utils import backward_will_follow, is_float8tensor


class TrainingState:
    IDLE = 0
    FORWARD = 1
    PRE_BACKWARD = 2


class MegatronFSDP(nn.Module):
    def all_gather_and_wait_parameters_ready(self, params, prefetch=True,
                                             prefetch_order=PrefetchOrder.FORWARD_PASS_ORDER,
                                             wait_bucket_ready=True, bwd=False, grad_enabled=True):
        if self.data_parallel_sharding_strategy == "no_shard":
            return
        ag_pipeline: AllGatherPipeline = self.all_gather_pipeline
        ag_pipeline.all_gather_params(
            params=params,
            prefetch=prefetch,
            prefetch_order=prefetch_order,
            suggested_AG_prefetch_size=self.suggested_AG_prefetch_size,
            bwd=bwd,
            grad_enabled=grad_enabled,
        )
        if wait_bucket_ready:
            for param in params:
                bucket_id = self.param_and_grad_buffer.param_to_param_group[param]
                ag_pipeline.wait_bucket_ready(bucket_id, bwd)

    def _register_fsdp_hooks(self, root_module):
        fsdp_unit_modules = self.fsdp_unit_modules

        def release_module_parameters(module, bwd, lazy=False, *unused):
            for param in module.parameters():
                bucket_id = self.param_and_grad_buffer.param_to_param_group[param]
                self.all_gather_pipeline.release_bucket(bucket_id, bwd, lazy=lazy)
            # FP8 transpose (columnwise) copies are only consumed by the backward GEMMs
            if not self.ddp_config.keep_fp8_transpose_cache or not backward_will_follow():
                for param in module.parameters():
                    if is_float8tensor(param):
                        param._transpose = None

        @torch.compiler.disable
        def _pre_forward_param_unshard(module: nn.Module, args: Tuple[Any, ...], kwargs: Dict[str, Any]):
            input_training_state = module._training_state
            fsdp_forward_prefetch = True
            if input_training_state == TrainingState.PRE_BACKWARD:
                # In activation recomputation case, we need to cancel forward prefetch.
                fsdp_forward_prefetch = False
            else:
                module._training_state = TrainingState.FORWARD
            if isinstance(module, tuple(fsdp_unit_modules)):
                param_list = list(module.parameters())
            else:
                param_list = list(module.parameters(recurse=False))
            self.all_gather_and_wait_parameters_ready(
                params=param_list,
                prefetch=fsdp_forward_prefetch,
                prefetch_order=PrefetchOrder.FORWARD_PASS_ORDER,
                grad_enabled=backward_will_follow(),
            )
            return args, kwargs

        @torch.compiler.disable
        def _register_post_backward_hook(post_backward_hook, module: nn.Module, args, kwargs):
            if not torch.is_grad_enabled():
                # No gradients / backward pass, don't attach the post-backward hook.
                return args, kwargs
            inp_tensors = [a for a in args if torch.is_tensor(a) and a.requires_grad]
            if not inp_tensors:
                return args, kwargs
            return self._attach_post_backward(post_backward_hook, module, args, kwargs)

        @torch.compiler.disable
        def _post_forward(module: nn.Module, input: Any, output: Any):
            if module._training_state == TrainingState.PRE_BACKWARD:
                lazy_release = True
            else:
                lazy_release = False
                module._training_state = TrainingState.IDLE
            release_module_parameters(module, bwd=False, lazy=lazy_release)
            return output

        for module in root_module.modules():
            if isinstance(module, tuple(fsdp_unit_modules)):
                module.register_forward_pre_hook(_pre_forward_param_unshard, with_kwargs=True)
                module.register_forward_hook(_post_forward)
