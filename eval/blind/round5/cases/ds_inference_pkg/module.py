import torch
import torch.nn as nn

from .config import DeepSpeedInferenceConfig
from .ops import DeepSpeedSelfAttentionFunction


class DeepSpeedTransformerInference(nn.Module):
    layer_id = 0

    def __init__(self, config: DeepSpeedInferenceConfig, mp_group=None):
        super().__init__()
        self.config = config
        self.config.layer_id = DeepSpeedTransformerInference.layer_id
        DeepSpeedTransformerInference.layer_id += 1
        self.mp_group = mp_group
        self.attn_qkvw = nn.Parameter(torch.empty(config.hidden_size, 3 * config.hidden_size // config.mp_size))
        self.attn_ow = nn.Parameter(torch.empty(config.hidden_size // config.mp_size, config.hidden_size))

    def forward(self, input, input_mask=None, layer_past=None, use_cache=False):
        self.config.is_grad_enabled = torch.is_grad_enabled()
        self.config.training = self.training
        output = DeepSpeedSelfAttentionFunction.apply(
            input, input_mask, self.attn_qkvw, self.attn_ow, self.config, self.mp_group, layer_past
        )
        return (output, layer_past) if use_cache else output
