# adapted from pytorch/torchtitan torchtitan/models/moe/moe.py
import contextlib

import torch

# Per-step routing state shared by all MoE layers of a model.
STATE = {"grad": True}


@contextlib.contextmanager
def routing_scope():
    prev = STATE["grad"]
    STATE["grad"] = torch.is_grad_enabled()
    try:
        yield STATE
    finally:
        STATE["grad"] = prev
