# Modeled on DeepSpeed deepspeed/runtime/pipe/module.py (PipelineModule.forward with
# activation_checkpoint_interval) and deepspeed/runtime/pipe/engine.py
# (_exec_forward_pass partitioning, _recv_tensor_meta / requires_grad on received buffers).
import torch
import torch.nn as nn


class PipelineModule(nn.Module):
    def __init__(self, layers, activation_checkpoint_interval=0, checkpointable_layers=None):
        super().__init__()
        self.forward_funcs = list(layers)
        self.activation_checkpoint_interval = activation_checkpoint_interval
        self.activation_checkpoint_func = torch.utils.checkpoint.checkpoint

    def forward(self, forward_input):
        def exec_range_func(start, end):
            def exec_func(*inputs):
                if len(inputs) == 1:
                    inputs = inputs[0]
                for layer in self.forward_funcs[start:end]:
                    inputs = layer(inputs)
                return inputs
            return exec_func

        if self.activation_checkpoint_interval == 0 or not torch.is_grad_enabled():
            func = exec_range_func(0, len(self.forward_funcs))
            return func(forward_input)
        num_layers = len(self.forward_funcs)
        x = forward_input
        for start_idx in range(0, num_layers, self.activation_checkpoint_interval):
            end_idx = min(start_idx + self.activation_checkpoint_interval, num_layers)
            if not isinstance(x, tuple):
                x = (x,)
            x = self.activation_checkpoint_func(exec_range_func(start_idx, end_idx), *x)
        return x


class PipelineEngineSlice:
    def __init__(self, module, is_pipe_partitioned, grid):
        self.module = module
        self.is_pipe_partitioned = is_pipe_partitioned
        self.grid = grid
        self.pipe_buffers = {"inputs": [], "outputs": []}

    def is_last_stage(self):
        return self.grid.get_stage_id() == self.grid.pipe_parallel_size - 1

    def _exec_forward_pass(self, buffer_id):
        from deepspeed.runtime.utils import PartitionedTensor
        inputs = self.pipe_buffers["inputs"][buffer_id]
        outputs = self.module(inputs)
        # Partition the outputs if we are not the last stage
        if self.is_pipe_partitioned and not self.is_last_stage() and torch.is_grad_enabled():
            first_output = outputs[0] if isinstance(outputs, tuple) else outputs
            part = PartitionedTensor(tensor=first_output, group=self.grid.get_slice_parallel_group())
            first_output.data = torch.zeros(1)
            self.pipe_buffers["output_tensors"] = first_output
            outputs = (part.to_meta(), part.data(), *outputs[1:]) if isinstance(outputs, tuple) else (part.to_meta(), part.data())
        self.pipe_buffers["outputs"][buffer_id] = outputs

    def _allocate_recv_buffer(self, shape, dtype, device):
        recvd = torch.zeros(shape, dtype=dtype, device=device)
        # Only float buffers can carry grads, and only if a backward will run
        recvd.requires_grad = recvd.is_floating_point() and torch.is_grad_enabled()
        return recvd
