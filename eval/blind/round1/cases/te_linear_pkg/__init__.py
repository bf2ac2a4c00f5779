"""Trimmed TransformerEngine-style Linear split over module / function / comm files."""
from .module import Linear

__all__ = ["Linear"]
