from contextlib import contextmanager
from typing import Dict, Generator, Optional

import torch

from .distributed import get_distributed_world_size

_ub_communicators: Dict[str, object] = {}


def initialize_ub(shape, tp_size: int, use_fp8: bool = False, ub_cfgs: Optional[dict] = None):
    import transformer_engine_torch as tex

    for name in ("qkv_fprop", "proj_fprop", "fc1_fprop", "fc2_fprop"):
        cfg = (ub_cfgs or {}).get(name, {})
        _ub_communicators[name] = tex.CommOverlap(
            shape, torch.bfloat16, tp_size,
            num_splits=cfg.get("num_splits", 4),
            num_max_streams=cfg.get("num_max_streams", 3),
        )


def get_ub(name: str):
    assert name in _ub_communicators, f"UB for {name} is not registered."
    return _ub_communicators[name]


class TransformerEngineBaseModule(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fp8 = False
        self.tp_group = None
        self.tp_size = 1
        self.sequence_parallel = False
        self.activation_dtype: Optional[torch.dtype] = None
        self._is_grad_enabled = True

    def set_activation_dtype(self, inp: torch.Tensor) -> None:
        if torch.is_autocast_enabled():
            self.activation_dtype = torch.get_autocast_gpu_dtype()
        else:
            self.activation_dtype = inp.dtype

    @contextmanager
    def prepare_forward(self, inp: torch.Tensor, num_gemms: int = 1) -> Generator[torch.Tensor, None, None]:
        self.set_activation_dtype(inp)
        self._is_grad_enabled = torch.is_grad_enabled()
        if self.tp_size > 1:
            assert get_distributed_world_size(self.tp_group) == self.tp_size
        with torch.cuda.nvtx.range(self.__class__.__name__ + " forward"):
            if not inp.is_contiguous():
                inp = inp.contiguous()
            yield inp
