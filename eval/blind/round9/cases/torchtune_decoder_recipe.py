import contextlib
from typing import List, Optional, Union

import torch
import torch.nn.functional as F
from torch import nn

from torchtune.training import OffloadActivations, NoOpManager


class MultiHeadAttention(nn.Module):
    def __init__(self, embed_dim: int, num_heads: int, head_dim: int, attn_dropout: float = 0.0,
                 is_causal: bool = True):
        super().__init__()
        self.num_heads = num_heads
        self.head_dim = head_dim
        self.attn_dropout = attn_dropout
        self.is_causal = is_causal
        self.q_proj = nn.Linear(embed_dim, num_heads * head_dim, bias=False)
        self.k_proj = nn.Linear(embed_dim, num_heads * head_dim, bias=False)
        self.v_proj = nn.Linear(embed_dim, num_heads * head_dim, bias=False)
        self.output_proj = nn.Linear(num_heads * head_dim, embed_dim, bias=False)
        self.kv_cache = None

    def forward(self, x: torch.Tensor, mask: Optional[torch.Tensor] = None) -> torch.Tensor:
        b, s, _ = x.shape
        q = self.q_proj(x).view(b, s, self.num_heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(b, s, self.num_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(b, s, self.num_heads, self.head_dim).transpose(1, 2)
        output = F.scaled_dot_product_attention(
            q, k, v,
            attn_mask=mask,
            dropout_p=self.attn_dropout if self.training else 0.0,
            is_causal=self.kv_cache is None and mask is None and self.is_causal,
        )
        output = output.transpose(1, 2).contiguous().view(b, s, -1)
        return self.output_proj(output)


class TransformerDecoder(nn.Module):
    def __init__(self, tok_embeddings: nn.Embedding, layers: nn.ModuleList, norm: nn.Module,
                 output: nn.Linear):
        super().__init__()
        self.tok_embeddings = tok_embeddings
        self.layers = layers
        self.norm = norm
        self.output = output
        self.num_output_chunks = 0

    def set_num_output_chunks(self, num_output_chunks: int) -> None:
        self.num_output_chunks = num_output_chunks

    def chunked_output(self, last_hidden_state: torch.Tensor) -> List[torch.Tensor]:
        return [self.output(chunk) for chunk in last_hidden_state.chunk(self.num_output_chunks, dim=1)]

    def forward(self, tokens: torch.Tensor, mask: Optional[torch.Tensor] = None
                ) -> Union[torch.Tensor, List[torch.Tensor]]:
        h = self.tok_embeddings(tokens)
        for layer in self.layers:
            h = layer(h, mask=mask)
        h = self.norm(h)
        if self.num_output_chunks > 0 and torch.is_grad_enabled():
            output = self.chunked_output(h)
        else:
            output = self.output(h).float()
        return output


def get_act_offloading_ctx_manager(model: nn.Module, enable_activation_offloading: bool):
    if enable_activation_offloading and torch.is_grad_enabled():
        activations_handling_ctx = OffloadActivations()
        if hasattr(model, "output"):
            noop_ctx = NoOpManager()
            model.output.register_forward_pre_hook(lambda *args: noop_ctx.__enter__())
            model.output.register_forward_hook(lambda *args: noop_ctx.__exit__(), always_call=True)
        return activations_handling_ctx
    return contextlib.nullcontext()


def eval_step(model: nn.Module, batch: dict, loss_fn, enable_activation_offloading: bool):
    with torch.no_grad(), get_act_offloading_ctx_manager(model, enable_activation_offloading):
        logits = model(batch["tokens"], mask=batch.get("mask"))
    labels = batch["labels"]
    if isinstance(logits, list):
        return loss_fn(logits, labels)
    return F.cross_entropy(logits.reshape(-1, logits.size(-1)), labels.reshape(-1), ignore_index=-100)
