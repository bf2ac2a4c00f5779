from abc import ABC, abstractmethod
from typing import List, Union

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed import ProcessGroup


class ParallelModule(nn.Module, ABC):
    def __init__(self, **kwargs):
        super().__init__()

    @staticmethod
    @abstractmethod
    def from_native_module(module: nn.Module, process_group: Union[ProcessGroup, List[ProcessGroup]] = None
                           ) -> "ParallelModule":
        pass

    def _grad_on(self) -> bool:
        return torch.is_grad_enabled()

    def _tp_world_size(self, process_group: ProcessGroup) -> int:
        return dist.get_world_size(process_group) if dist.is_initialized() else 1
