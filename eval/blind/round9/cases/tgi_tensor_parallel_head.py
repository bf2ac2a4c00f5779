from typing import List

import torch
import torch.distributed
from torch.nn import functional as F

from text_generation_server.layers.linear import FastLinear, get_linear


class LayerConcat(torch.nn.Module):
    def __init__(self, layers: List[torch.nn.Module], dim: int = -1):
        super().__init__()
        self.layers = layers
        self.dim = dim

    def forward(self, x: torch.Tensor):
        return torch.cat([layer(x) for layer in self.layers], self.dim)


class SuperLayer(torch.nn.Module):
    def __init__(self, linear):
        super().__init__()
        self.linear = linear

    def forward(self, x):
        return self.linear.forward(x)


class TensorParallelHead(SuperLayer):
    def __init__(self, linear, process_group, should_gather: bool):
        super().__init__(linear)
        self.process_group = process_group
        self.should_gather = should_gather

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        if not self.should_gather:
            return super().forward(input)

        world_size = self.process_group.size()
        match torch.is_inference_mode_enabled(), input.dim(), isinstance(self.linear, FastLinear):
            case (True, 2, True):
                out_dim = self.linear.weight.shape[0]
                if input.shape[0] == 1:
                    world_out = input.new_empty(1, out_dim * world_size)
                    local_out = input.new_empty(1, out_dim)
                    gather_input = local_out
                else:
                    world_out = input.new_empty(out_dim * world_size, input.shape[0])
                    gather_input = input.new_empty(out_dim, input.shape[0])
                    local_out = gather_input.T
                torch.mm(input, self.linear.weight.T, out=local_out)
                torch.distributed.all_gather_into_tensor(world_out, gather_input, group=self.process_group)
                if input.shape[0] == 1:
                    return world_out
                return world_out.T
            case _:
                output = super().forward(input)
                world_output = [torch.empty_like(output) for _ in range(world_size)]
                torch.distributed.all_gather(world_output, output, group=self.process_group)
                return torch.cat(world_output, dim=-1)


class TensorParallelRowLinear(SuperLayer):
    def __init__(self, linear, process_group):
        super().__init__(linear)
        self.process_group = process_group

    @classmethod
    def load(cls, config, prefix: str, weights, bias: bool):
        weight = weights.get_weights_row(prefix)
        b = weights.get_tensor(f"{prefix}.bias") if bias and weights.process_group.rank() == 0 else None
        return cls(get_linear(weight, b), process_group=weights.process_group)

    def forward(self, input: torch.Tensor, reduce: bool = True) -> torch.Tensor:
        out = super().forward(input)
        if self.process_group.size() > 1 and reduce:
            torch.distributed.all_reduce(out, group=self.process_group)
        return out
