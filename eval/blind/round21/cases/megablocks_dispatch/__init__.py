# adapted from databricks/megablocks megablocks/layers/moe.py
from .dispatch import Dispatcher, select_dispatcher
from .moe import MoE
