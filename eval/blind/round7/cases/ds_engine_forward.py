import torch

from deepspeed.utils import instrument_w_nvtx
from deepspeed.runtime.utils import see_memory_usage


class DeepSpeedEngine(torch.nn.Module):
    def __init__(self, module, config, optimizer=None):
        super().__init__()
        self.module = module
        self._config = config
        self.optimizer = optimizer
        self.micro_steps = 0
        self._pending_backward = False
        self.param_names = {p: n for n, p in module.named_parameters()}

    def fp16_auto_cast(self):
        return self._config.fp16_auto_cast

    def zero_optimization_partition_weights(self):
        return self._config.zero_optimization_stage >= 3

    def _cast_inputs_half(self, inputs):
        if isinstance(inputs, (list, tuple)):
            return inputs.__class__(self._cast_inputs_half(v) for v in inputs)
        if isinstance(inputs, dict):
            return {k: self._cast_inputs_half(v) for k, v in inputs.items()}
        if torch.is_tensor(inputs) and inputs.is_floating_point():
            return inputs.half()
        return inputs

    @instrument_w_nvtx
    def forward(self, *inputs, **kwargs):
        grad_on = torch.is_grad_enabled()
        if self.zero_optimization_partition_weights():
            for module in self.module.modules():
                module._parameters._in_forward = True

        if self.fp16_auto_cast() and grad_on:
            inputs = self._cast_inputs_half(inputs)
            kwargs = self._cast_inputs_half(kwargs)

        loss = self.module(*inputs, **kwargs)

        if self.zero_optimization_partition_weights():
            for module in self.module.modules():
                module._parameters._in_forward = False

        if grad_on and self.module.training:
            self._pending_backward = True
            self.micro_steps += 1
        see_memory_usage("Engine after forward", force=False)
        return loss

    def backward(self, loss):
        assert self._pending_backward, "backward() called without a preceding training forward"
        self._pending_backward = False
        self.optimizer.backward(loss)
        return loss
