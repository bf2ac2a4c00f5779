# adapted from Lightning-AI/litgpt litgpt/model.py
from functools import partial

import torch
import torch.nn as nn

from litgpt.config import Config


class GPT(nn.Module):
    def __init__(self, config: Config) -> None:
        super().__init__()
        self.config = config
        self.lm_head = nn.Linear(config.n_embd, config.padded_vocab_size, bias=config.lm_head_bias)
        self.transformer = nn.ModuleDict(
            dict(
                wte=nn.Embedding(config.padded_vocab_size, config.n_embd),
                h=nn.ModuleList(Block(config, block_idx) for block_idx in range(config.n_layer)),
                ln_f=config.norm_class(config.n_embd, eps=config.norm_eps),
            )
        )
        self.mask_cache = None

    def forward(self, idx, input_pos=None, input_pos_maxp1=None, lm_head_chunk_size: int = 0):
        T = idx.size(1)
        cos = self.cos[:T].unsqueeze(0)
        sin = self.sin[:T].unsqueeze(0)
        mask = None

        x = self.transformer.wte(idx)
        if self.config.scale_embeddings:
            x = x * torch.tensor(self.config.n_embd**0.5, dtype=x.dtype if torch.is_grad_enabled() else torch.float32)

        for block in self.transformer.h:
            x = block(x, cos, sin, mask, input_pos, input_pos_maxp1)
        x = self.transformer.ln_f(x)
        clamp_head = (
            partial(do_softcapping, thresh=self.config.final_logit_softcapping)
            if self.config.final_logit_softcapping is not None and not torch.is_grad_enabled()
            else nn.Identity()
        )
        if lm_head_chunk_size > 0:
            return [clamp_head(self.lm_head(x_i)) for x_i in x.split(lm_head_chunk_size, dim=1)]
        else:
            return clamp_head(self.lm_head(x))


def do_softcapping(x: torch.Tensor, thresh: float = 30.0) -> torch.Tensor:
    return torch.tanh(x / thresh) * thresh
