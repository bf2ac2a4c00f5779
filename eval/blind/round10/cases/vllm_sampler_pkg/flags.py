# Runtime flags dict returned by a helper; one entry carries grad mode.
import torch


def runtime_flags(sampling_metadata=None):
    flags = {
        "grad": torch.is_grad_enabled(),
        "inference_mode": torch.is_inference_mode_enabled(),
        "all_greedy": getattr(sampling_metadata, "all_greedy", False),
    }
    return flags
