# adapted from pytorch/torchtitan torchtitan/distributed/expert_parallel.py
from abc import ABC, abstractmethod

import torch
import torch.nn as nn
from torch import Tensor
from torch.distributed._functional_collectives import all_to_all_single, all_to_all_single_autograd
from torch.distributed.tensor import DeviceMesh, distribute_module, distribute_tensor, Shard
from torch.distributed.tensor.parallel import ParallelStyle

from torchtitan.components.quantization import FLOAT8_GROUP_ALIGNMENT_SIZE
from torchtitan.models.common.moe.utils import _permute, _unpermute


class BaseExpertParallel(ParallelStyle, ABC):
    @abstractmethod
    def _partition_fn(self, name: str, mod: nn.Module, device_mesh: DeviceMesh) -> None:
        ...

    @abstractmethod
    def _token_dispatch(self, mod: nn.Module, inputs: tuple, device_mesh: DeviceMesh) -> tuple[Tensor, Tensor]:
        ...

    @abstractmethod
    def _token_combine(self, mod: nn.Module, routed_output: Tensor, device_mesh: DeviceMesh) -> Tensor:
        ...

    def _all_to_all(self, tensor: Tensor, output_splits, input_splits, group) -> Tensor:
        if torch.is_grad_enabled():
            return all_to_all_single_autograd(tensor, output_splits, input_splits, group)
        out = all_to_all_single(tensor, output_splits, input_splits, group)
        return torch.ops._c10d_functional.wait_tensor(out)

    def _exchange_splits(self, mod: nn.Module, num_tokens_per_expert: Tensor, device_mesh: DeviceMesh):
        ep_degree = device_mesh.shape[0]
        # generate the input splits and output splits for all-to-all
        with torch.no_grad():
            num_tokens_per_expert_group = all_to_all_single(
                num_tokens_per_expert,
                None,
                None,
                group=device_mesh.get_group(),
            )
            if getattr(mod, "_overlap_a2a", False):
                # keep the splits on device and let the collective run async with the
                # permutation-index computation below
                num_tokens_per_expert_group = torch.ops._c10d_functional.wait_tensor(num_tokens_per_expert_group)
                input_splits = num_tokens_per_expert.view(ep_degree, -1).sum(dim=1).to(
                    torch.device("cpu"), non_blocking=True
                )
                output_splits = num_tokens_per_expert_group.view(ep_degree, -1).sum(dim=1).to(
                    torch.device("cpu"), non_blocking=True
                )
                torch.cuda.current_stream().synchronize()
            else:
                # Need to wait explicitly because it is used by a triton kernel later
                # which doesn't realize that AsyncCollectiveTensor needs unwrapping
                num_tokens_per_expert_group = torch.ops._c10d_functional.wait_tensor(num_tokens_per_expert_group)
                input_splits = num_tokens_per_expert.view(ep_degree, -1).sum(dim=1).to(
                    torch.device("cpu"), non_blocking=False
                )
                # NOTE: this would incur a device-to-host sync
                output_splits = num_tokens_per_expert_group.view(ep_degree, -1).sum(dim=1).to(
                    torch.device("cpu"), non_blocking=False
                )
        return num_tokens_per_expert_group, input_splits.tolist(), output_splits.tolist()


class ExpertParallel(BaseExpertParallel):
    def __init__(self):
        super().__init__()
        self.input_splits = None
        self.output_splits = None
        self.input_shape = None
        self.permuted_indices = None

    def _partition_fn(self, name: str, mod: nn.Module, device_mesh: DeviceMesh) -> None:
        for param_name, param in mod.named_parameters(recurse=False):
            dist_param = nn.Parameter(distribute_tensor(param, device_mesh, [Shard(0)]))
            mod.register_parameter(param_name, dist_param)

    def _token_dispatch(self, mod: nn.Module, inputs: tuple, device_mesh: DeviceMesh) -> tuple[Tensor, Tensor]:
        # annotate module input placements/sharding with input_layouts
        routed_input, num_tokens_per_expert = inputs
        ep_degree = device_mesh.shape[0]
        num_local_experts = num_tokens_per_expert.shape[0] // ep_degree

        num_tokens_per_expert_group, self.input_splits, self.output_splits = self._exchange_splits(
            mod, num_tokens_per_expert, device_mesh
        )

        # perform all-to-all
        routed_input = self._all_to_all(routed_input, self.output_splits, self.input_splits, device_mesh.get_group())

        (
            self.input_shape,
            routed_input,
            self.permuted_indices,
            num_tokens_per_expert_group,
        ) = _permute(routed_input, num_tokens_per_expert_group, ep_degree, num_local_experts)
        return routed_input, num_tokens_per_expert_group

    def _token_combine(self, mod: nn.Module, routed_output: Tensor, device_mesh: DeviceMesh) -> Tensor:
        routed_output = _unpermute(routed_output, self.input_shape, self.permuted_indices)
        routed_output = self._all_to_all(routed_output, self.input_splits, self.output_splits, device_mesh.get_group())
        return routed_output

    def _apply(self, module: nn.Module, device_mesh: DeviceMesh) -> nn.Module:
        return distribute_module(
            module,
            device_mesh,
            partition_fn=self._partition_fn,
            input_fn=self._token_dispatch,
            output_fn=self._token_combine,
        )


class Float8ExpertParallel(ExpertParallel):
    def _token_dispatch(self, mod: nn.Module, inputs: tuple, device_mesh: DeviceMesh) -> tuple[Tensor, Tensor]:
        routed_input, num_tokens_per_expert = inputs
        ep_degree = device_mesh.shape[0]
        num_local_experts = num_tokens_per_expert.shape[0] // ep_degree

        num_tokens_per_expert_group, self.input_splits, self.output_splits = self._exchange_splits(
            mod, num_tokens_per_expert, device_mesh
        )
        routed_input = self._all_to_all(routed_input, self.output_splits, self.input_splits, device_mesh.get_group())

        # FP8/MXFP8 require groups to be permuted to expert major order AND padded to nearest multiple of 16.
        from torchao.prototype.moe_training.ep.permute import permute_and_pad

        (
            self.input_shape,
            routed_input,
            self.permuted_indices,
            num_tokens_per_expert_group_padded,
            group_offsets,
        ) = permute_and_pad(
            routed_input,
            num_tokens_per_expert_group,
            ep_degree,
            num_local_experts,
            FLOAT8_GROUP_ALIGNMENT_SIZE,
        )
        return routed_input, num_tokens_per_expert_group_padded

    def _token_combine(self, mod: nn.Module, routed_output: Tensor, device_mesh: DeviceMesh) -> Tensor:
        routed_output = _unpermute(routed_output, self.input_shape, self.permuted_indices, remove_padding_row=True)
        routed_output = self._all_to_all(routed_output, self.input_splits, self.output_splits, device_mesh.get_group())
        return routed_output
