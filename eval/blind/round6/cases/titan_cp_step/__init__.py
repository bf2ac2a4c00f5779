from .step import make_step_context

__all__ = ["make_step_context"]
