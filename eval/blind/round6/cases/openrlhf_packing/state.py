import torch


class _PackingState:
    def __init__(self) -> None:
        self.is_train = True
        self.ring_attn_group = None


PACKING_STATE = _PackingState()


def record_grad_mode(module, args, kwargs):
    PACKING_STATE.is_train = torch.is_grad_enabled()
    return args, kwargs
