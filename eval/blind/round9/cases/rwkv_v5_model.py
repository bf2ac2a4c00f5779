import math
import os

import deepspeed
import pytorch_lightning as pl
import torch
import torch.nn as nn
from torch.nn import functional as F


class L2Wrap(torch.autograd.Function):
    @staticmethod
    def forward(ctx, loss, y):
        ctx.save_for_backward(y)
        return loss

    @staticmethod
    def backward(ctx, grad_output):
        y = ctx.saved_tensors[0]
        factor = 1e-4 / (y.shape[0] * y.shape[1])
        maxx, ids = torch.max(y, -1, keepdim=True)
        gy = torch.zeros_like(y)
        gy.scatter_(-1, ids, maxx * factor)
        return (grad_output, gy)


class RWKV(pl.LightningModule):
    def __init__(self, args, blocks: nn.ModuleList):
        super().__init__()
        self.args = args
        self.emb = nn.Embedding(args.vocab_size, args.n_embd)
        self.blocks = blocks
        self.ln_out = nn.LayerNorm(args.n_embd)
        self.head = nn.Linear(args.n_embd, args.vocab_size, bias=False)

    def forward(self, idx):
        args = self.args
        B, T = idx.size()
        assert T <= args.ctx_len, "Cannot forward, model ctx_len is exhausted."

        x = self.emb(idx)
        x_emb = x
        if args.dropout > 0:
            x = F.dropout(x, p=args.dropout, training=torch.is_grad_enabled())

        for block in self.blocks:
            if (use_cp := args.grad_cp == 1 and torch.is_grad_enabled()):
                x = deepspeed.checkpointing.checkpoint(block, x, x_emb)
            else:
                x = block(x, x_emb)

        x = self.ln_out(x)
        x = self.head(x)
        return x

    def training_step(self, batch, batch_idx):
        idx, targets = batch
        logits = self(idx)
        loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
        return L2Wrap.apply(loss, logits)

    def validation_step(self, batch, batch_idx):
        idx, targets = batch
        logits = self(idx)
        loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
        if torch.is_grad_enabled():
            loss = L2Wrap.apply(loss, logits)
        self.log("val_loss", loss, prog_bar=True, sync_dist=True)
        return loss

    def generate_init_weight(self):
        m = {}
        for n, p in self.state_dict().items():
            shape = p.shape
            if "ln_" in n or ".ln" in n:
                m[n] = p
            elif n == "emb.weight":
                scale = -1 * self.args.lr_init
                m[n] = torch.empty((shape[0], shape[1])).uniform_(-abs(scale), abs(scale))
            elif n == "head.weight":
                scale = 0.5 * math.sqrt(self.args.vocab_size / self.args.n_embd)
                m[n] = torch.empty((shape[0], shape[1])).orthogonal_(gain=scale)
            else:
                m[n] = torch.zeros_like(p) if os.environ.get("RWKV_ZERO_INIT") == "1" else p
        return m
