# Copyright (c) 2025, NVIDIA CORPORATION. All rights reserved.
"""CUDA graph capture / replay manager (trimmed from megatron/core/transformer/cuda_graphs.py)."""
import inspect
from enum import Enum

import torch

from megatron.core.transformer.module import MegatronModule


class _GraphStatus(Enum):
    FWD_READY = 0
    BWD_READY = 1


class _CudagraphGlobalRecord:
    cudagraph_created = False
    cudagraph_record = []


class _CudaGraphRunner(torch.nn.Module):

    def create_fwd_graph(self, args, kwargs, clone_inputs=True):
        # save grads and other variables that may be affected by graph warmup
        if self.training and torch.is_grad_enabled():
            save_main_grads = [
                param.main_grad.clone()
                for param in self.base_module.parameters()
                if hasattr(param, "main_grad")
            ]
        else:
            save_main_grads = None

        self.fwd_graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.fwd_graph, pool=self.fwd_mempool):
            outputs = self.base_module.forward(*args, **kwargs)
        self.fwd_graph_outputs = outputs if isinstance(outputs, tuple) else (outputs,)

        if save_main_grads is not None:
            for param, main_grad in zip(
                (p for p in self.base_module.parameters() if hasattr(p, "main_grad")), save_main_grads
            ):
                param.main_grad.copy_(main_grad)


class CudaGraphManager(torch.nn.Module):
    """Creates and runs cudagraphs for a megatron module"""

    def call_ddp_preforward_hook(self, module):
        """Call any DDP pre-forward hooks which are used to launch async data parallel
        param gather. Any other pre-forward hooks are not allowed."""
        from megatron.core.distributed import distributed_data_parallel

        if module._forward_pre_hooks:
            for _, hook in module._forward_pre_hooks.items():
                assert (
                    inspect.getmodule(hook) == distributed_data_parallel
                ), "Tried to cudagraph a module with user registered pre-forward hooks, which is not allowed."
                hook(module, None)

    def __call__(self, megatron_module, args, kwargs):
        if _CudagraphGlobalRecord.cudagraph_created:
            if self.training and torch.is_grad_enabled():
                # param.data_ptr() triggers the param sync hook of the APEX distributed optimizer.
                for param in megatron_module.parameters():
                    param.data_ptr()

                # Trigger Mcore DDP pre-forward hooks
                self.call_ddp_preforward_hook(megatron_module)
                for module in megatron_module.modules():
                    self.call_ddp_preforward_hook(module)

            runner = self.get_cudagraph_runner(megatron_module)
            out = runner.replay_graph_capture(self.is_first_microbatch, args, kwargs)
        else:
            if "inference_context" in kwargs.keys() and kwargs["inference_context"]:
                runner = self.get_cudagraph_runner(megatron_module)
                runner.eval()
                out = runner.record_graph_capture(args, kwargs)
            elif self.training and torch.is_grad_enabled():
                runner = self.get_cudagraph_runner(megatron_module)
                out = runner.record_graph_capture(args, kwargs)
            else:
                # No cudagraphs were found in training mode with grad disabled, so fallback to
                # eager since autograd is needed to correctly trace the backward graph.
                return super(MegatronModule, megatron_module).__call__(*args, **kwargs)

        # If forward only, next replay should be a forward pass as well
        if self.training and torch.is_grad_enabled():
            runner.status = _GraphStatus.BWD_READY
        else:
            runner.status = _GraphStatus.FWD_READY

        return out
