# adapted from deepspeedai/DeepSpeed deepspeed/runtime/zero/parameter_offload.py
FWD_MODULE_STACK = list()


class _ForwardState:
    """Per-iteration facts shared by every ZeRO-3 module hook."""

    def __init__(self):
        self.grad_enabled = True
        self.step_id = 0


FWD_STATE = _ForwardState()
