# Modelled on transformer_engine/pytorch/ops/fuser.py (TransformerEngine 2.1-2.4).
from typing import Any, Optional

import torch

from transformer_engine.pytorch.fp8 import FP8GlobalStateManager
from transformer_engine.pytorch.ops.op import OperationContext

from .userbuffers_fusion import fuse_userbuffers_forward_linear


class _OperationFuserAutogradFunction(torch.autograd.Function):
    @staticmethod
    def forward(func_ctx: Optional[torch.autograd.function.FunctionCtx], input_: torch.Tensor, fuser,
                basic_op_kwargs: list[dict[str, Any]], is_grad_enabled: bool, *params_and_extra_inputs):
        basic_op_ctxs = [OperationContext() for _ in range(fuser._num_basic_ops)]
        for idx, ctx in enumerate(basic_op_ctxs):
            ctx.requires_grad = idx >= fuser.first_op_requiring_backward
        x = input_
        for op, basic_op_idxs in fuser._forward_ops:
            x, _ = op.fuser_forward(
                [basic_op_ctxs[idx] for idx in basic_op_idxs],
                x,
                basic_op_extra_inputs=[() for _ in basic_op_idxs],
                prev_op_grad_output_quantizer=None,
                next_op_input_quantizer=None,
                basic_op_kwargs=[basic_op_kwargs[idx] for idx in basic_op_idxs],
            )
        if is_grad_enabled:
            to_save = []
            for ctx in basic_op_ctxs:
                to_save.extend(ctx.to_save or ())
            func_ctx.save_for_backward(*to_save)
            func_ctx.backward_ops = fuser._backward_ops
            func_ctx.basic_op_ctxs = basic_op_ctxs
        return x

    @staticmethod
    def backward(func_ctx, grad_output):
        raise NotImplementedError


class OperationFuser:
    def __init__(self, ops, fuse_ops: bool = True):
        self._basic_ops = [op for op in ops]
        self._num_basic_ops = len(self._basic_ops)
        self._basic_op_params = [p for op in self._basic_ops for p in op.parameters()]
        self._fuse_ops = fuse_ops
        self._fused_key = None
        self._forward_ops = [(op, (idx,)) for idx, op in enumerate(self._basic_ops)]
        self._backward_ops = list(reversed(self._forward_ops))
        self.first_op_requiring_backward = 0

    def maybe_fuse_ops(self, is_grad_enabled: bool, recipe, input_: torch.Tensor):
        if is_grad_enabled:
            self.first_op_requiring_backward = 0 if input_.requires_grad else next(
                (idx for idx, op in enumerate(self._basic_ops) if any(p.requires_grad for p in op.parameters())),
                self._num_basic_ops,
            )
        else:
            self.first_op_requiring_backward = self._num_basic_ops
        key = (is_grad_enabled, type(recipe), self.first_op_requiring_backward)
        if self._fuse_ops and key != self._fused_key:
            ops = [(op, (idx,)) for idx, op in enumerate(self._basic_ops)]
            self._forward_ops = fuse_userbuffers_forward_linear(ops, recipe=recipe, allow_userbuffers=is_grad_enabled)
            self._backward_ops = list(reversed(ops))
            self._fused_key = key

    def __call__(self, input: torch.Tensor, *, basic_op_kwargs: Optional[list[dict[str, Any]]] = None):
        if basic_op_kwargs is None:
            basic_op_kwargs = [{}] * self._num_basic_ops
        is_grad_enabled = torch.is_grad_enabled()
        self.maybe_fuse_ops(is_grad_enabled, FP8GlobalStateManager.get_fp8_recipe(), input)
        if is_grad_enabled:
            forward_func = _OperationFuserAutogradFunction.apply
            args = []
        else:
            forward_func = _OperationFuserAutogradFunction.forward
            args = [None]
        args += (input, self, basic_op_kwargs, is_grad_enabled, *self._basic_op_params)
        return forward_func(*args)
