# Adapted from volcengine/verl verl/workers/actor/dp_actor.py (DataParallelPPOActor._forward_micro_batch)
# and verl/utils/experimental/torch_functional.py (FusedLinearForPPO).
from .actor import DataParallelPPOActor
from .kernels import compute_log_prob_kernel

__all__ = ["DataParallelPPOActor", "compute_log_prob_kernel"]
