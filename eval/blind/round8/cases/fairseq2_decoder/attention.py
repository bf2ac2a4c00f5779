import torch
import torch.nn.functional as F


def naive_sdpa(q, k, v, mask, dropout_p):
    weights = torch.matmul(q, k.transpose(-1, -2)) * (q.size(-1) ** -0.5)
    if mask is not None:
        weights = weights + mask
    weights = torch.softmax(weights, dim=-1, dtype=torch.float32).type_as(q)
    weights = F.dropout(weights, dropout_p)
    return torch.matmul(weights, v)


def torch_sdpa(q, k, v, mask, dropout_p):
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p)


class SDPA(torch.nn.Module):

    def __init__(self, dropout_p=0.0):
        super().__init__()
        self.dropout_p = dropout_p

    def forward(self, q, k, v, mask, opts):
        attn_fn = torch_sdpa if opts.build_graph else naive_sdpa
        return attn_fn(q, k, v, mask, self.dropout_p if self.training else 0.0)
