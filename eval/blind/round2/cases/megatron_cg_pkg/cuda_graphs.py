# Modelled on Megatron-LM megatron/core/transformer/cuda_graphs.py (CudaGraphManager.__call__)
import torch

from .ddp_hooks import trigger_ddp_param_sync
from .runner import _CudaGraphRunner


class _CudagraphGlobalRecord:
    cudagraph_created = False
    cudagraph_record = []


class CudaGraphManager(torch.nn.Module):
    def __init__(self, config, share_cudagraph_io_buffers=True):
        super().__init__()
        self.config = config
        self.cudagraph_runners = []
        self.is_first_microbatch = False
        self.reuse_cudagraphs = config.cuda_graph_use_single_mempool

    def get_cudagraph_runner(self, megatron_module, args, kwargs):
        if not self.cudagraph_runners:
            self.cudagraph_runners.append(_CudaGraphRunner(megatron_module, None, None))
        return self.cudagraph_runners[0]

    def __call__(self, megatron_module, args, kwargs):
        is_inference_mode = 'inference_context' in kwargs.keys() and kwargs['inference_context']
        grad_on = torch.is_grad_enabled()

        if _CudagraphGlobalRecord.cudagraph_created:
            # Trigger Mcore DDP pre-forward hooks
            trigger_ddp_param_sync(megatron_module, training=self.training, grad_enabled=grad_on)
            runner = self.get_cudagraph_runner(megatron_module, args, kwargs)
            out = runner.replay_graph_capture(self.is_first_microbatch, args, kwargs)
        else:
            runner = self.get_cudagraph_runner(megatron_module, args, kwargs)
            out = runner.record_graph_capture(args, kwargs, grad_enabled=grad_on)
            _CudagraphGlobalRecord.cudagraph_record.append((runner, "fwd", args, kwargs))

        self.is_first_microbatch = False
        runner.finish_step(is_inference_mode, grad_on)
        return out
