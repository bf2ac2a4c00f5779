"""Ulysses sequence-parallel actor forward split like verl (utils/ulysses.py, models/transformers, workers/actor)."""
from .actor import DataParallelPPOActor
from .context import UlyssesContext, get_ulysses_context, set_ulysses_context

__all__ = ["DataParallelPPOActor", "UlyssesContext", "get_ulysses_context", "set_ulysses_context"]
