# adapted from pytorch/pytorch torch/distributed/fsdp/_common_utils.py
"""
This file includes private common utilities for FSDP.
"""
from enum import auto, Enum
from typing import Any, Dict, List, Optional, Tuple

import torch
import torch.distributed as dist
import torch.nn as nn

from torch.distributed.fsdp._flat_param import FlatParamHandle
from torch.distributed.fsdp.api import MixedPrecision, ShardingStrategy


class TrainingState(Enum):
    """
    An enum that indicates the state of a ``FullyShardedDataParallel` instance.
    """

    IDLE = auto()
    FORWARD_BACKWARD = auto()
    SUMMON_FULL_PARAMS = auto()


class HandleTrainingState(Enum):
    """
    An enum that indicates the state of a ``FlatParamHandle`.
    """

    IDLE = auto()
    FORWARD = auto()
    BACKWARD_PRE = auto()
    BACKWARD_POST = auto()
    SUMMON_FULL_PARAMS = auto()


class _FSDPState:
    # Grad mode of the most recent root pre-forward; shared by every FSDP
    # instance in the process.
    _root_forward_grad_enabled: bool = True

    def __init__(self) -> None:
        self._ignored_modules: set = set()
        self._ignored_params: set = set()
        self.process_group: Optional[dist.ProcessGroup] = None
        self.rank: int = -1
        self.world_size: int = -1
        self.sharding_strategy = ShardingStrategy.FULL_SHARD
        self._use_orig_params: bool = False
        self.training_state = TrainingState.IDLE
        self._unshard_params_ctx: Dict[nn.Module, Any] = {}
        self._state_dict_type = None
        self._is_root: Optional[bool] = None
        self._handles: List[FlatParamHandle] = []
        self.compute_device: Optional[torch.device] = None
        self.mixed_precision = MixedPrecision()
        self.forward_prefetch: bool = False
        self.limit_all_gathers: bool = False
        self._streams: Dict[str, torch.cuda.Stream] = {}
        self._needs_pre_forward_unshard: Dict[Tuple[FlatParamHandle, ...], bool] = {}
        self._handles_prefetched: Dict[Tuple[FlatParamHandle, ...], bool] = {}


def _is_composable(state: _FSDPState):
    # TODO: This is a temporary hack for differentiate between code paths.
    return not isinstance(state, nn.Module)


def _get_module_fsdp_state(module: nn.Module) -> Optional[_FSDPState]:
    state = getattr(module, "_fsdp_state", None)
    if state is None and isinstance(module, _FSDPState):
        return module
    return state
