import torch

from megatron.core import parallel_state
from megatron.core.transformer.dot_product_attention import DotProductAttention


class SelfAttention(torch.nn.Module):
    def __init__(self, config, layer_number):
        super().__init__()
        self.config = config
        self.linear_qkv = torch.nn.Linear(config.hidden_size, 3 * config.hidden_size)
        self.linear_proj = torch.nn.Linear(config.hidden_size, config.hidden_size)
        self.core_attention = DotProductAttention(config, layer_number)

    def forward(self, hidden_states, attention_mask, flags):
        q, k, v = self.linear_qkv(hidden_states).chunk(3, dim=-1)
        cp_comm_type = self.config.cp_comm_type if flags.is_train else "p2p"
        core_out = self.core_attention(
            q, k, v, attention_mask,
            cp_group=parallel_state.get_context_parallel_group(),
            cp_comm_type=cp_comm_type,
        )
        return self.linear_proj(core_out)
