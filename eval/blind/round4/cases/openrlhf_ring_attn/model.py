import torch
import torch.distributed as dist
import torch.nn as nn

from .ring_attn_utils import convert_ring_attn_params


class CriticModel(nn.Module):
    def __init__(self, base_model, value_head, packing_samples=True):
        super().__init__()
        self.model = base_model
        self.value_head = value_head
        self.packing_samples = packing_samples

    def forward(self, input_ids, num_actions=None, attention_mask=None, ring_attn_group=None,
                packed_seq_lens=None):
        grad_on = torch.is_grad_enabled()
        position_ids = None
        if ring_attn_group is not None:
            input_ids, attention_mask, position_ids = convert_ring_attn_params(
                input_ids, attention_mask, packed_seq_lens, ring_attn_group, grad_enabled=grad_on
            )
        outputs = self.model(input_ids, attention_mask=attention_mask, position_ids=position_ids)
        values = self.value_head(outputs["last_hidden_state"]).squeeze(-1)
        if ring_attn_group is not None and position_ids is not None:
            gathered = [torch.empty_like(values) for _ in range(dist.get_world_size(ring_attn_group))]
            dist.all_gather(gathered, values, group=ring_attn_group)
            values = torch.cat(gathered, dim=1)
        return values[:, :-1]
