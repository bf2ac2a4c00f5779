import torch
import torch.distributed as dist

from composer.core import Algorithm, Event
from composer.utils import module_surgery


class StochasticBottleneck(torch.nn.Module):

    _is_training = staticmethod(torch.is_grad_enabled)

    def __init__(self, block, drop_rate, drop_distribution="linear", rand_generator=None):
        super().__init__()
        self.block = block
        self.drop_rate = torch.tensor(drop_rate)
        self.drop_distribution = drop_distribution
        self.rand_generator = rand_generator

    def forward(self, x):
        identity = x if self.block.downsample is None else self.block.downsample(x)
        if self._is_training() and self.drop_rate > 0:
            sample = torch.bernoulli(1 - self.drop_rate, generator=self.rand_generator)
            if not sample:
                return identity
        out = self.block.residual(x)
        return torch.relu(out + identity)


class RunningLossTracker:

    def __init__(self, process_group=None):
        self.process_group = process_group
        self.total = None
        self.count = 0

    def update(self, loss):
        value = loss.detach().clone()
        if StochasticBottleneck._is_training() and dist.is_initialized():
            dist.all_reduce(value, op=dist.ReduceOp.AVG, group=self.process_group)
        self.total = value if self.total is None else self.total + value
        self.count += 1

    def compute(self):
        return self.total / max(self.count, 1)


class StochasticDepth(Algorithm):

    def __init__(self, target_layer_name, stochastic_method="block", drop_rate=0.2):
        self.target_layer_name = target_layer_name
        self.stochastic_method = stochastic_method
        self.drop_rate = drop_rate

    def match(self, event, state):
        return event == Event.INIT

    def apply(self, event, state, logger):
        def _replace(module, module_index):
            return StochasticBottleneck(module, self.drop_rate)

        module_surgery.replace_module_classes(state.model, {self.target_layer_name: _replace})
