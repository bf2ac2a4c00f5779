"""Modelled on Megatron-LM megatron/core/transformer/cuda_graphs.py
(_CudaGraphRunner / CudaGraphManager)."""
import torch

from megatron.core.tensor_parallel.random import get_all_rng_states


class _CudaGraphRunner(torch.nn.Module):
    def __init__(self, base_module, fwd_mempool, bwd_mempool, args, kwargs):
        super().__init__()
        self.base_module = base_module
        self.fwd_mempool = fwd_mempool
        self.bwd_mempool = bwd_mempool
        self.fwd_graph = None
        self.bwd_graph = None
        self.fwd_graph_recorded = False

    def get_fwd_input_buffers(self, args, kwargs):
        requires_grad = torch.is_grad_enabled()
        return [
            arg.detach().requires_grad_(requires_grad) if torch.is_tensor(arg) else arg
            for arg in args
        ]

    @property
    def _replaying_training_step(self):
        return self.base_module.training and torch.is_grad_enabled()

    def replay_graph_capture(self, is_first_microbatch, args, kwargs):
        if self._replaying_training_step:
            # Replaying the graph skips the eager forward, so DDP / distributed-optimizer
            # pre-forward hooks (param all-gather dispatch, bucket bookkeeping) must be run by hand.
            for module in self.base_module.modules():
                for hook in module._forward_pre_hooks.values():
                    hook(module, args)
        for buf, arg in zip(self.fwd_graph_input_surface, args):
            if torch.is_tensor(arg) and buf.data_ptr() != arg.data_ptr():
                buf.copy_(arg)
        self.fwd_graph.replay()
        return self.fwd_graph_output_surface

    def record_graph_capture(self, args, kwargs):
        self.fwd_graph = torch.cuda.CUDAGraph()
        self.fwd_graph_input_surface = self.get_fwd_input_buffers(args, kwargs)
        with torch.cuda.graph(self.fwd_graph, pool=self.fwd_mempool):
            out = self.base_module.forward(*self.fwd_graph_input_surface, **kwargs)
        self.fwd_graph_output_surface = out if isinstance(out, tuple) else (out,)
        self.fwd_graph_recorded = True
        return self.fwd_graph_output_surface


class CudaGraphManager(torch.nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.cudagraph_runners = []

    def __call__(self, megatron_module, args, kwargs):
        runner = self.cudagraph_runners[0]
        if runner.fwd_graph_recorded:
            out = runner.replay_graph_capture(kwargs.get("is_first_microbatch"), args, kwargs)
        else:
            out = runner.record_graph_capture(args, kwargs)
        return out[0] if len(out) == 1 else out
