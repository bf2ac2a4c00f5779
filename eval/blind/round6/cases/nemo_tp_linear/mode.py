import torch


def current_mode() -> dict:
    return {
        "grad": torch.is_grad_enabled(),
        "autocast": torch.is_autocast_enabled(),
    }
