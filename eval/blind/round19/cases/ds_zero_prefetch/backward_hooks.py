# adapted from deepspeedai/DeepSpeed deepspeed/runtime/zero/parameter_offload.py
import torch

from .state import FWD_STATE


def make_post_backward_module_hook(apply_to_tensors_only, warning_msg_fn):

    @torch.compiler.disable
    def _post_backward_module_hook(module, inputs):
        module.ds_grads_remaining = 0
        # without a graph the PostBackwardFunctionModule would never run backward
        if not FWD_STATE.grad_enabled:
            return inputs
        return apply_to_tensors_only(module.post_bwd_fn.apply,
                                     inputs,
                                     warning_msg_fn=warning_msg_fn)

    return _post_backward_module_hook
