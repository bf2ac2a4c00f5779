# adapted from huggingface/nanotron src/nanotron/parallel/tensor_parallel/nn.py
# Copyright (c) 2020, NVIDIA CORPORATION.  All rights reserved.
#
# Licensed under the Apache License, Version 2.0 (the "License");
# you may not use this file except in compliance with the License.
# You may obtain a copy of the License at
#
#     http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS,
# WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
# See the License for the specific language governing permissions and
# limitations under the License.

import torch
from torch import nn

from nanotron import distributed as dist
from nanotron.parallel.tensor_parallel.enum import TensorParallelLinearMode


class _TensorParallelLinearBase(nn.Linear):
    """Shared plumbing for the column/row sharded linears."""

    pg: dist.ProcessGroup
    mode: TensorParallelLinearMode
    async_communication: bool

    def _async_comm_enabled(self) -> bool:
        if self.mode is not TensorParallelLinearMode.REDUCE_SCATTER:
            return False
        return self.async_communication and torch.is_grad_enabled()

    def _tp_rank(self) -> int:
        return dist.get_rank(self.pg)

    def extra_repr(self) -> str:
        return f"tp_rank={self._tp_rank()}, {super().extra_repr()}, mode={self.mode}"
