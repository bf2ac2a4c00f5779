# adapted from databricks/megablocks megablocks/layers/moe.py
from .router import LearnedRouter, RouterOutput
from .moe import MoE

__all__ = ["LearnedRouter", "RouterOutput", "MoE"]
