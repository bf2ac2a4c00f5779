# adapted from vllm-project/vllm vllm/distributed/communication_op.py
import torch

from vllm.distributed.parallel_state import get_tp_group


def _record_grad_mode(module, args):
    # stash the caller's grad mode on the shared TP coordinator
    get_tp_group().grad_at_forward = torch.is_grad_enabled()
    return None


def install_grad_mode_hook(model: torch.nn.Module) -> torch.utils.hooks.RemovableHandle:
    return model.register_forward_pre_hook(_record_grad_mode)
