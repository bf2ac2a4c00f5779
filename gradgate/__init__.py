"""gradgate: find and fix forward-path decisions gated on PyTorch grad mode."""

#: the one version source: pyproject.toml reads it (``dynamic = ["version"]``)
__version__ = "0.2.0rc1"
