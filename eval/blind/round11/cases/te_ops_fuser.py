# Adapted from NVIDIA/TransformerEngine transformer_engine/pytorch/ops/fuser.py
# (_OperationFuserAutogradFunction.forward, OperationFuser.maybe_fuse_ops / _fuse_forward_ops / __call__).
import itertools

import torch

from transformer_engine.pytorch.fp8 import FP8GlobalStateManager
from transformer_engine.pytorch.ops.fused import (
    fuse_forward_linear_bias_activation,
    fuse_forward_linear_bias_add,
    fuse_userbuffers_forward_linear,
)
from transformer_engine.pytorch.ops.op import OperationContext


class _OperationFuserAutogradFunction(torch.autograd.Function):
    @staticmethod
    def forward(func_ctx, input_, fuser, basic_op_kwargs, *params_and_extra_inputs):
        basic_op_ctxs = [OperationContext() for _ in range(fuser._num_basic_ops)]
        recipe = FP8GlobalStateManager.get_fp8_recipe() if FP8GlobalStateManager.is_fp8_enabled() else None
        is_grad_enabled = func_ctx is not None

        fuser.maybe_fuse_ops(is_grad_enabled, recipe, input_)

        x = input_
        for op, basic_op_idxs in fuser._forward_ops:
            for idx in basic_op_idxs:
                basic_op_ctxs[idx].requires_grad = idx >= fuser.first_op_requiring_backward
            x, _ = op.fuser_forward(
                [basic_op_ctxs[idx] for idx in basic_op_idxs],
                x,
                basic_op_kwargs=[basic_op_kwargs[idx] for idx in basic_op_idxs],
            )

        if is_grad_enabled:
            to_save = []
            for ctx in basic_op_ctxs:
                range_start = len(to_save)
                if ctx.to_save is not None:
                    to_save.extend(ctx.to_save)
                ctx._saved_tensors_range = (range_start, len(to_save))
            func_ctx.save_for_backward(*to_save)
            func_ctx.backward_ops = fuser._backward_ops
            func_ctx.basic_op_ctxs = basic_op_ctxs

        x.requires_grad_(fuser.first_op_requiring_backward < fuser._num_basic_ops)
        return x


class OperationFuser:
    @classmethod
    def _fuse_forward_ops(cls, ops, recipe, is_grad_enabled):
        if is_grad_enabled:
            ops = fuse_userbuffers_forward_linear(ops)
        ops = fuse_forward_linear_bias_add(ops)
        ops = fuse_forward_linear_bias_activation(ops)
        return ops

    def maybe_fuse_ops(self, is_grad_enabled, recipe, input_):
        if not is_grad_enabled:
            first_op_requiring_backward = self._num_basic_ops
        elif input_.requires_grad:
            first_op_requiring_backward = 0
        else:
            first_op_requiring_backward = self._num_basic_ops
            for op_idx in range(self._num_basic_ops):
                if any(t.requires_grad for t in itertools.chain(self._basic_op_params[op_idx])):
                    first_op_requiring_backward = op_idx
                    break
        self.first_op_requiring_backward = first_op_requiring_backward
        self._forward_ops = self._fuse_forward_ops(self._basic_ops_with_idx(), recipe, is_grad_enabled)

    def __call__(self, input, basic_op_kwargs=None):
        if basic_op_kwargs is None:
            basic_op_kwargs = [{}] * self._num_basic_ops
        if torch.is_grad_enabled():
            forward_func = _OperationFuserAutogradFunction.apply
            args = []
        else:
            forward_func = _OperationFuserAutogradFunction.forward
            args = [None]
        args += (input, self, basic_op_kwargs, *self._flat_basic_op_params)
        return forward_func(*args)
