# Modelled on megatron/core/transformer/cuda_graphs.py (Megatron-LM core_r0.10-0.12).
import torch

from megatron.core.distributed import DistributedDataParallel


class _CudagraphGlobalRecord:
    cudagraph_created = False
    cudagraph_record = []


class _CudagraphReplayNode(torch.autograd.Function):
    @staticmethod
    def forward(ctx, runner, is_first_microbatch, *inputs):
        for user_input, cudagraph_input in zip(inputs, runner.fwd_graph_input_surface):
            if user_input.data_ptr() != cudagraph_input.data_ptr():
                cudagraph_input.copy_(user_input)
        if ctx is not None:
            ctx.runner = runner
        if runner.fp8_enabled and is_first_microbatch:
            for m in runner.base_module.modules():
                if hasattr(m, "fp8_meta"):
                    m.fp8_meta["fp8_group"] = runner.fp8_group
        runner.fwd_graph.replay()
        return tuple(o.detach() for o in runner.fwd_graph_output_surface)

    @staticmethod
    def backward(ctx, *grads):
        ctx.runner.bwd_graph.replay()
        return (None, None) + tuple(ctx.runner.static_grad_inputs)


class _CudaGraphRunner(torch.nn.Module):
    def __init__(self, base_module, fwd_mempool, bwd_mempool, fp8_enabled=False):
        super().__init__()
        self.base_module = base_module
        self.fwd_mempool = fwd_mempool
        self.bwd_mempool = bwd_mempool
        self.fp8_enabled = fp8_enabled
        self.fwd_graph = None
        self.bwd_graph = None

    def replay_graph_capture(self, is_first_microbatch, args, kwargs):
        inputs = [a for a in args if torch.is_tensor(a)] + [v for v in kwargs.values() if torch.is_tensor(v)]
        if torch.is_grad_enabled():
            out = _CudagraphReplayNode.apply(self, is_first_microbatch, *inputs)
        else:
            out = _CudagraphReplayNode.forward(None, self, is_first_microbatch, *inputs)
        return out[0] if len(out) == 1 else out


class CudaGraphManager(torch.nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.cudagraph_runners = []
        self.is_first_microbatch = True

    def call_ddp_preforward_hook(self, module):
        if isinstance(module, DistributedDataParallel):
            return
        for _, hook in module._forward_pre_hooks.items():
            hook(module, None)

    def get_cudagraph_runner(self, megatron_module, args, kwargs):
        for runner in self.cudagraph_runners:
            if runner.status_matches(args, kwargs):
                return runner
        runner = _CudaGraphRunner(megatron_module, None, None, self.config.fp8 is not None)
        self.cudagraph_runners.append(runner)
        return runner

    def __call__(self, megatron_module, args, kwargs):
        if _CudagraphGlobalRecord.cudagraph_created:
            if self.training and torch.is_grad_enabled():
                for param in megatron_module.parameters():
                    param.data_ptr()
                self.call_ddp_preforward_hook(megatron_module)
            runner = self.get_cudagraph_runner(megatron_module, args, kwargs)
            out = runner.replay_graph_capture(self.is_first_microbatch, args, kwargs)
        else:
            runner = self.get_cudagraph_runner(megatron_module, args, kwargs)
            _CudagraphGlobalRecord.cudagraph_record.append((runner, args, kwargs))
            out = super(megatron_module.__class__, megatron_module).__call__(*args, **kwargs)
        self.is_first_microbatch = False
        return out
