# adapted from pytorch/pytorch torch/distributed/tensor/_api.py
from typing import Any, Callable, Optional, Sequence, Tuple

import torch
import torch.nn as nn
from torch.distributed.tensor._dtensor_spec import DTensorSpec, TensorMeta
from torch.distributed.tensor.device_mesh import DeviceMesh, _mesh_resources
from torch.distributed.tensor.placement_types import Placement, Replicate, Shard

from ._redistribute import Redistribute, redistribute_local_tensor


class _ToTorchTensor(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input: "DTensor", grad_placements: Optional[Sequence[Placement]]):
        ctx.dtensor_spec = input._spec
        ctx.grad_placements = grad_placements
        local_tensor = input._local_tensor
        # We need to return a fresh Tensor object there as autograd metadata
        # will be inplaced into it. So we don't want to pollute the Tensor
        # object stored in the _local_tensor of this DTensor.
        return local_tensor.view_as(local_tensor)

    @staticmethod
    def backward(ctx, grad_output: torch.Tensor):
        dtensor_spec = ctx.dtensor_spec
        mesh = dtensor_spec.mesh
        grad_placements = ctx.grad_placements
        dtensor_meta = dtensor_spec.tensor_meta
        grad_spec = DTensorSpec(mesh, tuple(grad_placements or dtensor_spec.placements), tensor_meta=dtensor_meta)
        return DTensor(grad_output, grad_spec, requires_grad=grad_output.requires_grad), None


class _FromTorchTensor(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input: torch.Tensor, device_mesh: DeviceMesh, placements: Tuple[Placement, ...], run_check: bool, shape=None, stride=None) -> "DTensor":
        ctx.previous_placement = placements
        ctx.previous_device_mesh = device_mesh
        if shape and stride:
            tensor_shape, tensor_stride = shape, stride
        else:
            tensor_shape, tensor_stride = input.shape, input.stride()
        dist_spec = DTensorSpec(
            device_mesh,
            placements,
            tensor_meta=TensorMeta(tensor_shape, tensor_stride, input.dtype),
        )
        return DTensor(input.view_as(input), dist_spec, requires_grad=input.requires_grad)

    @staticmethod
    def backward(ctx, grad_output: "DTensor"):
        return grad_output.to_local(), None, None, None, None, None


class DTensor(torch.Tensor):
    """
    ``DTensor`` (Distributed Tensor) is a subclass of ``torch.Tensor`` that provides single-device like
    abstraction to program with multi-device ``torch.Tensor``.
    """

    _local_tensor: torch.Tensor
    _spec: DTensorSpec

    @staticmethod
    def __new__(cls, local_tensor: torch.Tensor, spec: DTensorSpec, *, requires_grad: bool) -> "DTensor":
        r = torch.Tensor._make_wrapper_subclass(
            cls,
            spec.tensor_meta.shape,
            strides=spec.tensor_meta.stride,
            dtype=local_tensor.dtype,
            device=local_tensor.device,
            layout=local_tensor.layout,
            requires_grad=requires_grad,
        )
        r._spec = spec
        r._local_tensor = local_tensor
        return r

    @staticmethod
    def from_local(local_tensor: torch.Tensor, device_mesh: Optional[DeviceMesh] = None, placements: Optional[Sequence[Placement]] = None, *, run_check: bool = False, shape=None, stride=None) -> "DTensor":
        device_mesh = device_mesh or _mesh_resources.get_current_mesh()
        if placements is None:
            placements = [Replicate() for _ in range(device_mesh.ndim)]
        else:
            placements = list(placements)
        return _FromTorchTensor.apply(local_tensor, device_mesh, tuple(placements), run_check, shape, stride)

    def to_local(self, *, grad_placements: Optional[Sequence[Placement]] = None) -> torch.Tensor:
        """
        Get the local tensor of this DTensor on its current rank.
        """
        if not torch.is_grad_enabled():
            return self._local_tensor

        if grad_placements is not None and not isinstance(grad_placements, tuple):
            grad_placements = tuple(grad_placements)
        return _ToTorchTensor.apply(self, grad_placements)

    def redistribute(
        self,
        device_mesh: Optional[DeviceMesh] = None,
        placements: Optional[Sequence[Placement]] = None,
        *,
        async_op: bool = False,
    ) -> "DTensor":
        """
        ``redistribute`` performs necessary collective operations that redistribute the current
        DTensor from its current placements to a new placements, or from its current DeviceMesh
        to a new DeviceMesh.
        """
        device_mesh = device_mesh or self.device_mesh
        if placements is None:
            raise RuntimeError("placements is needed for redistribute!")
        placements = list(placements)
        for i, placement in enumerate(placements):
            if placement.is_partial():
                raise RuntimeError("Can not redistribute to Partial, redistributing to Partial is for internal use only!")
            elif isinstance(placement, Shard) and placement.dim < 0:
                placements[i] = Shard(placement.dim + self.ndim)
        placements = tuple(placements)
        return Redistribute.apply(self, device_mesh, placements, async_op)

    @property
    def device_mesh(self) -> DeviceMesh:
        return self._spec.mesh

    @property
    def placements(self) -> Tuple[Placement, ...]:
        return self._spec.placements


def distribute_tensor(tensor: torch.Tensor, device_mesh: Optional[DeviceMesh] = None, placements: Optional[Sequence[Placement]] = None) -> DTensor:
    device_mesh = device_mesh or _mesh_resources.get_current_mesh()
    placements = placements or [Replicate() for _ in range(device_mesh.ndim)]
    local_tensor = tensor.detach()
    for idx, placement in enumerate(placements):
        if placement.is_shard():
            local_tensor = placement._split_tensor(local_tensor, device_mesh.size(idx))[0][device_mesh.get_local_rank(idx)]
    spec = DTensorSpec(
        mesh=device_mesh,
        placements=tuple(placements),
        tensor_meta=TensorMeta(shape=tensor.size(), stride=tensor.stride(), dtype=tensor.dtype),
    )
    return DTensor(local_tensor.requires_grad_(tensor.requires_grad), spec, requires_grad=tensor.requires_grad)


def distribute_module(
    module: nn.Module,
    device_mesh: Optional[DeviceMesh] = None,
    partition_fn: Optional[Callable[[str, nn.Module, DeviceMesh], None]] = None,
    input_fn: Optional[Callable[[nn.Module, Any, DeviceMesh], None]] = None,
    output_fn: Optional[Callable[[nn.Module, Any, DeviceMesh], None]] = None,
) -> nn.Module:
    device_mesh = device_mesh or _mesh_resources.get_current_mesh()
    if partition_fn is not None:
        for name, submod in module.named_modules():
            partition_fn(name, submod, device_mesh)
    if input_fn is not None:
        module.register_forward_pre_hook(lambda _, inputs: input_fn(module, inputs, device_mesh))
    if output_fn is not None:
        module.register_forward_hook(lambda mod, inputs, outputs: output_fn(mod, outputs, device_mesh))
    return module
