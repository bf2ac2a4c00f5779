# adapted from pytorch/pytorch torch/distributed/pipelining/schedules.py
import contextlib

_STEP_GRAD_ENABLED = True


def _set_step_grad_enabled(enabled: bool) -> None:
    global _STEP_GRAD_ENABLED
    _STEP_GRAD_ENABLED = enabled


def step_grad_enabled() -> bool:
    return _STEP_GRAD_ENABLED


@contextlib.contextmanager
def record_step_grad_mode(enabled: bool):
    prev = _STEP_GRAD_ENABLED
    _set_step_grad_enabled(enabled)
    try:
        yield
    finally:
        _set_step_grad_enabled(prev)
