# Modelled on Megatron-LM megatron/core/distributed/distributed_data_parallel.py (forward pre-hooks)
import inspect

import torch

from megatron.core.transformer.cuda_graphs import is_graph_capturing


def call_ddp_preforward_hook(module):
    """Call any DDP pre-forward hooks which are used to launch async data parallel param gather."""
    if module._forward_pre_hooks:
        for _, hook in module._forward_pre_hooks.items():
            assert inspect.getmodule(hook) == inspect.getmodule(call_ddp_preforward_hook), (
                "Tried to cudagraph a module with user registered pre-forward hooks, which is not allowed."
            )
            hook(module)


def trigger_ddp_param_sync(megatron_module, training: bool, grad_enabled: bool):
    """Graph replay bypasses nn.Module.__call__, so DDP's param all-gather hooks are fired by hand."""
    if training and grad_enabled:
        call_ddp_preforward_hook(megatron_module)
        for module in megatron_module.modules():
            call_ddp_preforward_hook(module)


class DistributedDataParallel(torch.nn.Module):
    def _make_forward_pre_hook(self):
        def hook(module, *unused):
            assert self.use_forward_hook, "Should use pre-hook only when overlap_param_gather is True"
            if is_graph_capturing():
                return
            for param in module.parameters(recurse=False):
                if param not in self.param_to_bucket_group:
                    continue
                assert param.requires_grad
                skip_next_bucket_dispatch = (
                    self.ddp_config.align_param_gather
                    or self.overlap_param_gather_with_optimizer_step
                    or not torch.is_grad_enabled()
                )
                self.param_to_bucket_group[param].finish_param_sync(
                    skip_next_bucket_dispatch=skip_next_bucket_dispatch
                )
                if torch.is_grad_enabled():
                    # backward accumulates into main_grad; reset the per-step marker
                    param.grad_added_to_main_grad = False

        return hook
