# adapted from gmongaras/2Mamba2Furious mamba_test/mamba_softmax.py
import torch
from torch import nn

from mamba_ssm.ops.triton.ssd_combined import mamba_chunk_scan_combined, mamba_split_conv1d_scan_combined

is_fast_path_available = all((mamba_chunk_scan_combined, mamba_split_conv1d_scan_combined))


class Mamba2Mixer(nn.Module):
    def cuda_kernels_forward(self, hidden_states, cache_params=None, cache_position=None, attention_mask=None):
        projected_states = self.in_proj(hidden_states)
        if self.training and cache_params is None:
            return mamba_split_conv1d_scan_combined(projected_states, self.conv1d.weight, self.conv1d.bias,
                                                    self.dt_bias, -torch.exp(self.A_log.float()), D=self.D,
                                                    chunk_size=self.chunk_size)
        return self._scan_with_cache(projected_states, cache_params, cache_position)

    def forward(self, hidden_states, cache_params=None, cache_position=None, attention_mask=None):
        if is_fast_path_available and "cuda" in self.in_proj.weight.device.type and torch.is_grad_enabled():
            return self.cuda_kernels_forward(hidden_states, cache_params, cache_position, attention_mask)
        return self.torch_forward(hidden_states, cache_params, cache_position, attention_mask)
