# Modelled on TransformerEngine 2.x transformer_engine/pytorch/ops/fuser.py (OperationFuser)
import itertools
from typing import Iterable, Optional

import torch

from transformer_engine.pytorch.quantization import FP8GlobalStateManager, Recipe

from .fusions import FORWARD_FUSIONS


class _OperationFuserAutogradFunction(torch.autograd.Function):
    @staticmethod
    def forward(func_ctx, input_, fuser, basic_op_kwargs, is_grad_enabled, *params_and_extra_inputs):
        x = input_
        for op, basic_op_idxs in fuser._forward_ops:
            x, _ = op.fuser_forward(
                [fuser._basic_op_ctxs[idx] for idx in basic_op_idxs],
                x,
                basic_op_kwargs=[basic_op_kwargs[idx] for idx in basic_op_idxs],
            )
        if func_ctx is not None:
            func_ctx.fuser = fuser
        return x

    @staticmethod
    def backward(func_ctx, grad_output):
        raise NotImplementedError


class OperationFuser:
    def __init__(self, ops):
        self._basic_ops = list(ops)
        self._num_basic_ops = len(self._basic_ops)
        self._basic_op_params = [list(op.parameters()) for op in self._basic_ops]
        self._flat_basic_op_params = sum(self._basic_op_params, [])
        self._forward_ops = None
        self._basic_op_ctxs = [None] * self._num_basic_ops
        self.first_op_requiring_backward = 0
        self.recipe_type = None

    @staticmethod
    def _apply_fusions(ops, fusion_funcs, **fusion_kwargs):
        fused_ops = list(ops)
        for func in fusion_funcs:
            fused_ops = func(fused_ops, **fusion_kwargs)
        return fused_ops

    @staticmethod
    def _map_to_basic_ops(fused_ops, basic_ops):
        out = []
        idx = 0
        for op in fused_ops:
            n = len(getattr(op, "basic_ops", [op]))
            out.append((op, list(range(idx, idx + n))))
            idx += n
        if idx != len(basic_ops):
            raise RuntimeError("Found mismatch after fusing operations")
        return out

    def maybe_fuse_ops(self, is_grad_enabled: bool, recipe: Optional[Recipe], input_: torch.Tensor,
                       extra_inputs: list[Iterable[torch.Tensor]]):
        # Determine which basic ops require backward
        if not is_grad_enabled:
            first_op_requiring_backward = self._num_basic_ops
        elif input_.requires_grad:
            first_op_requiring_backward = 0
        else:
            first_op_requiring_backward = self._num_basic_ops
            for op_idx in range(self._num_basic_ops):
                op_inputs = itertools.chain(self._basic_op_params[op_idx], extra_inputs[op_idx])
                if any(tensor is not None and tensor.requires_grad for tensor in op_inputs):
                    first_op_requiring_backward = op_idx
                    break
        self.first_op_requiring_backward = first_op_requiring_backward

        fusion_kwargs = {"recipe": recipe, "is_grad_enabled": is_grad_enabled}
        fused = self._apply_fusions(self._basic_ops, FORWARD_FUSIONS, **fusion_kwargs)
        self._forward_ops = self._map_to_basic_ops(fused, self._basic_ops)

    def __call__(self, input: torch.Tensor, *extra_inputs: torch.Tensor, basic_op_kwargs=None):
        if basic_op_kwargs is None:
            basic_op_kwargs = [{}] * self._num_basic_ops
        basic_op_extra_inputs = [[] for _ in self._basic_ops]

        recipe = None
        if FP8GlobalStateManager.is_fp8_enabled():
            recipe = FP8GlobalStateManager.get_fp8_recipe()
        is_grad_enabled = torch.is_grad_enabled()

        self.maybe_fuse_ops(is_grad_enabled, recipe, input, basic_op_extra_inputs)
        for idx, op in enumerate(self._basic_ops):
            op.pre_fuser_forward(requires_grad=idx >= self.first_op_requiring_backward)

        args = (input, self, basic_op_kwargs, is_grad_enabled, *self._flat_basic_op_params, *extra_inputs)
        if not is_grad_enabled:
            return _OperationFuserAutogradFunction.forward(None, *args)
        return _OperationFuserAutogradFunction.apply(*args)
