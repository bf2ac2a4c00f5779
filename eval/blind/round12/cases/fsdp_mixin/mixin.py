# adapted from pytorch/pytorch torch/distributed/fsdp/_fully_shard/_fsdp_state.py
import torch


class _GradAwareStateMixin:
    """Shared runtime queries for FSDP states.

    Subclasses provide ``_states_to_forward_prefetch`` and ``_is_root``.
    """

    _states_to_forward_prefetch: list
    _is_root: bool = False

    @property
    def _grad_active(self) -> bool:
        return torch.is_grad_enabled()

    @property
    def _wants_forward_prefetch(self) -> bool:
        return self._grad_active and bool(self._states_to_forward_prefetch)

    @property
    def _is_root_state(self) -> bool:
        return bool(self._is_root)
