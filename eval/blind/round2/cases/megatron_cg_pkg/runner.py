# Modelled on Megatron-LM megatron/core/transformer/cuda_graphs.py (_CudaGraphRunner)
from contextlib import nullcontext
from enum import Enum

import torch


class _GraphStatus(Enum):
    FWD_READY = 0
    BWD_READY = 1


class _CudaGraphRunner(torch.nn.Module):
    def __init__(self, base_module, fwd_mempool, bwd_mempool, need_backward=True):
        super().__init__()
        self.base_module = base_module
        self.fwd_mempool = fwd_mempool
        self.bwd_mempool = bwd_mempool
        self.need_backward = need_backward
        self.fwd_graph = None
        self.status = _GraphStatus.FWD_READY

    def record_graph_capture(self, args, kwargs, grad_enabled: bool):
        # save grads that may be affected by graph warmup (warmup also runs backward)
        grad_backup = None
        if self.training and grad_enabled:
            grad_backup = [
                param.main_grad.clone() if hasattr(param, "main_grad") else None
                for param in self.base_module.parameters()
            ]

        ctx = torch.no_grad() if not (self.need_backward and grad_enabled) else nullcontext()
        with ctx:
            self.fwd_graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.fwd_graph, pool=self.fwd_mempool):
                outputs = self.base_module(*args, **kwargs)
        self.fwd_graph_outputs = outputs

        if grad_backup is not None:
            for param, grad in zip(self.base_module.parameters(), grad_backup):
                if grad is not None:
                    param.main_grad.copy_(grad)
        return outputs

    def replay_graph_capture(self, is_first_microbatch, args, kwargs):
        self.fwd_graph.replay()
        return self.fwd_graph_outputs

    def finish_step(self, is_inference_mode: bool, grad_enabled: bool):
        # If forward only, next replay should be a forward pass as well
        if is_inference_mode or not grad_enabled:
            self.status = _GraphStatus.FWD_READY
        else:
            self.status = _GraphStatus.BWD_READY
