import torch
import torch.distributed as dist
from torch import nn

from modelopt.torch.quantization.tensor_quant import fake_tensor_quant, scaled_e4m3
from modelopt.torch.quantization.qtensor import FP8QTensor


class TensorQuantizer(nn.Module):

    def __init__(self, num_bits=8, axis=None, amax_group=None, enable_real_quant=False):
        super().__init__()
        self._num_bits = num_bits
        self._axis = axis
        self._amax_group = amax_group
        self._if_calib = False
        self._if_quant = True
        self._enable_real_quant = enable_real_quant
        self.register_buffer("_amax", torch.tensor(0.0))
        self._calib_amax = None

    def enable_calib(self):
        self._if_calib = True

    def _collect(self, inputs):
        local_amax = inputs.detach().abs().amax()
        self._calib_amax = local_amax if self._calib_amax is None else torch.maximum(self._calib_amax, local_amax)

    def load_calib_amax(self):
        amax = self._calib_amax.clone()
        try:
            distributed = dist.is_initialized() and torch.is_grad_enabled()
        except RuntimeError:
            distributed = False
        if distributed:
            dist.all_reduce(amax, op=dist.ReduceOp.MAX, group=self._amax_group)
        self._amax.copy_(amax)
        self._if_calib = False

    def _fake_quantize(self, inputs):
        if self._num_bits == (4, 3):
            return scaled_e4m3(inputs, self._amax, None, 4, 3)
        return fake_tensor_quant(inputs, self._amax, None, self._num_bits)

    def _real_quantize(self, inputs):
        return FP8QTensor.quantize(inputs, scales=self._amax / 448.0)[0]

    def forward(self, inputs):
        if self._if_calib:
            self._collect(inputs)
            return inputs
        if not self._if_quant:
            return inputs
        if self._enable_real_quant and not torch.is_grad_enabled():
            return self._real_quantize(inputs)
        return self._fake_quantize(inputs)
