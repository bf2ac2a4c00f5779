# adapted from databricks/megablocks megablocks/layers/moe.py
import torch


class _ForwardContext:
    """Per-iteration facts shared by every MoE layer of the model."""

    grad_enabled = None
    num_layers_seen = 0


FORWARD_CTX = _ForwardContext()


def _moe_root_pre_forward_hook(module, args):
    FORWARD_CTX.grad_enabled = torch.is_grad_enabled()
    FORWARD_CTX.num_layers_seen = 0


def install_forward_context(model: torch.nn.Module):
    return model.register_forward_pre_hook(_moe_root_pre_forward_hook)
