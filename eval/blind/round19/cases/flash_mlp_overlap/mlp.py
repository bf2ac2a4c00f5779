# adapted from Dao-AILab/flash-attention flash_attn/ops/fused_dense.py
import torch
import torch.nn as nn
from torch.distributed import ProcessGroup

from flash_attn.utils.distributed import reduce_scatter, all_reduce

from .functional import FusedMLPFunc
from .mode import capture_grad_mode, overlap_enabled


class ParallelFusedMLP(nn.Module):

    def __init__(self, in_features, hidden_features, out_features=None, activation='gelu_approx',
                 process_group: ProcessGroup = None, bias1=True, bias2=True,
                 sequence_parallel=True, checkpoint_lvl=0, heuristic='auto', device=None, dtype=None):
        assert checkpoint_lvl in [0, 1, 2]
        assert activation in ['gelu_approx', 'relu', 'sqrelu']
        assert process_group is not None
        factory_kwargs = {'device': device, 'dtype': dtype}
        super().__init__()
        out_features = out_features or in_features
        self.activation = activation
        self.process_group = process_group
        self.sequence_parallel = sequence_parallel
        self.checkpoint_lvl = checkpoint_lvl
        self.heuristic = heuristic if activation != 'sqrelu' else -1
        world_size = torch.distributed.get_world_size(process_group)
        self.fc1_weight = nn.Parameter(torch.empty(hidden_features // world_size, in_features, **factory_kwargs))
        self.fc1_bias = nn.Parameter(torch.empty(hidden_features // world_size, **factory_kwargs)) if bias1 else None
        self.fc2_weight = nn.Parameter(torch.empty(out_features, hidden_features // world_size, **factory_kwargs))
        self.fc2_bias = nn.Parameter(torch.empty(out_features, **factory_kwargs)) if bias2 else None

    def forward(self, x):
        dtype = x.dtype if not torch.is_autocast_enabled() else torch.get_autocast_gpu_dtype()
        if self.heuristic == 'auto':
            cuda_ver = tuple(map(int, torch.version.cuda.split('.')))
            heuristic = 0 if cuda_ver >= (11, 8) else (1 if dtype == torch.float16 else -1)
        else:
            heuristic = self.heuristic
        with capture_grad_mode():
            sequence_parallel = self.sequence_parallel and overlap_enabled()
            # cublasLt epilogue only pays off when pre_act is needed by backward
            heuristic = heuristic if overlap_enabled() else -1
            checkpoint_lvl = self.checkpoint_lvl if overlap_enabled() else 0
            out = FusedMLPFunc.apply(
                x, self.fc1_weight, self.fc1_bias, self.fc2_weight, self.fc2_bias,
                self.activation, True, False, checkpoint_lvl, heuristic,
                self.process_group, sequence_parallel,
            )
        reduce_fn = reduce_scatter if self.sequence_parallel else all_reduce
        return reduce_fn(out, self.process_group)
