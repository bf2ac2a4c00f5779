# Modelled on verl/workers/actor/megatron_actor.py and verl/utils/megatron/tensor_parallel.py (verl v0.4).
from .actor import MegatronPPOActor
from .config import LogitsForwardConfig

__all__ = ["MegatronPPOActor", "LogitsForwardConfig"]
