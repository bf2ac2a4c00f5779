from contextlib import nullcontext
from typing import Dict, List, Optional

import torch

from megatron.core.distributed.param_and_grad_buffer import _ParamAndGradBucketGroup
from megatron.core.utils import is_graph_capturing


class DistributedDataParallel(torch.nn.Module):
    def __init__(self, config, ddp_config, module: torch.nn.Module):
        super().__init__()
        self.config = config
        self.ddp_config = ddp_config
        self.module = module
        self.param_to_bucket_group: Dict[torch.nn.Parameter, _ParamAndGradBucketGroup] = {}
        self.remove_forward_pre_hook_handles = {}
        self.grad_accs: List = []
        self.use_forward_hook = ddp_config.use_distributed_optimizer and ddp_config.overlap_param_gather
        if self.use_forward_hook:
            self.enable_forward_pre_hook()

    def enable_forward_pre_hook(self):
        for module in self.module.modules():
            self.remove_forward_pre_hook_handles[module] = module.register_forward_pre_hook(
                self._make_forward_pre_hook()
            )

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
                    self.ddp_config.align_param_gather or not torch.is_grad_enabled()
                )
                self.param_to_bucket_group[param].finish_param_sync(
                    skip_next_bucket_dispatch=skip_next_bucket_dispatch
                )
        return hook

    def _make_backward_post_hook(self, param: torch.nn.Parameter):
        def hook(*unused):
            if param in self.param_to_bucket_group and param.grad is not None:
                param.main_grad.add_(param.grad.data)
                param.grad = None
                if self.ddp_config.overlap_grad_reduce:
                    self.param_to_bucket_group[param].register_grad_ready(param)
        return hook

    def forward(self, *inputs, **kwargs):
        if torch.is_grad_enabled() and not self.grad_accs:
            for param in self.module.parameters():
                if param.requires_grad:
                    param_tmp = param.expand_as(param)
                    grad_acc = param_tmp.grad_fn.next_functions[0][0]
                    grad_acc.register_hook(self._make_backward_post_hook(param))
                    self.grad_accs.append(grad_acc)
        return self.module(*inputs, **kwargs)
