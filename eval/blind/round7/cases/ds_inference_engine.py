import time

import torch
from torch import nn

from deepspeed import comm as dist
from deepspeed.accelerator import get_accelerator


class LinearAllreduce(nn.Module):
    def __init__(self, weight, bias=None, mp_group=None):
        super().__init__()
        self.weight = weight
        self.bias = bias
        self.mp_group = mp_group

    def forward(self, input):
        output = torch.matmul(input, self.weight.transpose(-1, -2))
        if self.mp_group is not None:
            if torch.is_grad_enabled():
                dist.all_reduce(output, group=self.mp_group)
            else:
                dist.inference_all_reduce(output, group=self.mp_group)
        if self.bias is not None:
            output += self.bias
        return output


class InferenceEngine(nn.Module):
    def __init__(self, model, config):
        super().__init__()
        self.module = model
        self._config = config
        self.cuda_graph_created = False
        self.local_cuda_graph = False
        self.model_times = []

    def _create_cuda_graph(self, *inputs, **kwargs):
        cuda_stream = get_accelerator().Stream()
        cuda_stream.wait_stream(get_accelerator().current_stream())
        with get_accelerator().stream(cuda_stream):
            for i in range(3):
                ret = self.module(*inputs, **kwargs)
        get_accelerator().current_stream().wait_stream(cuda_stream)
        self._cuda_graphs = get_accelerator().create_graph()
        self.static_inputs = inputs
        self.static_kwargs = kwargs
        with get_accelerator().capture_to_graph(self._cuda_graphs):
            self.static_output = self.module(*self.static_inputs, **self.static_kwargs)
        self.cuda_graph_created = True

    def _graph_replay(self, *inputs, **kwargs):
        for i in range(len(inputs)):
            if torch.is_tensor(inputs[i]):
                self.static_inputs[i].copy_(inputs[i])
        for k in kwargs:
            if torch.is_tensor(kwargs[k]):
                self.static_kwargs[k].copy_(kwargs[k])
        get_accelerator().replay_graph(self._cuda_graphs)
        return self.static_output

    def forward(self, *inputs, **kwargs):
        start = None
        if self._config.enable_cuda_graph and self.model_profile_enabled:
            get_accelerator().synchronize()
            start = time.time()
        use_graph = self._config.enable_cuda_graph and not self.local_cuda_graph
        if use_graph and not torch.is_grad_enabled():
            if not self.cuda_graph_created:
                self._create_cuda_graph(*inputs, **kwargs)
            outputs = self._graph_replay(*inputs, **kwargs)
        else:
            outputs = self.module(*inputs, **kwargs)
        if start is not None:
            get_accelerator().synchronize()
            self.model_times.append(time.time() - start)
        return outputs

    @property
    def model_profile_enabled(self):
        return getattr(self._config, "model_profile_enabled", False)
