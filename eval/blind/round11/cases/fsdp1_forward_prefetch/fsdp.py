# Adapted from pytorch/pytorch torch/distributed/fsdp/fully_sharded_data_parallel.py (FullyShardedDataParallel.forward).
import torch.nn as nn
from torch.distributed.fsdp._runtime_utils import _root_pre_forward

from ._fwd_state import root_forward_context
from ._runtime_utils import _post_forward_reshard, _pre_forward_unshard, _register_post_backward_hooks


class FullyShardedDataParallel(nn.Module):
    def forward(self, *args, **kwargs):
        handles = self._handles
        with root_forward_context():
            args, kwargs = _root_pre_forward(self, self, args, kwargs)
            _pre_forward_unshard(self, handles)
            _register_post_backward_hooks(self, handles)
            output = self._fsdp_wrapped_module(*args, **kwargs)
            _post_forward_reshard(self, handles)
        return output
