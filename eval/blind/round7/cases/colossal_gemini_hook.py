from contextlib import contextmanager
from typing import List

import torch

from colossalai.tensor.param_op_hook import ColoParamOpHook
from colossalai.zero.gemini.chunk import ChunkManager, TensorState
from colossalai.zero.gemini.gemini_mgr import GeminiManager


class PreFwdPostBwd(torch.autograd.Function):
    @staticmethod
    def forward(ctx, params, *args):
        ctx.params = params
        return args

    @staticmethod
    def backward(ctx, *grads):
        ColoParamOpHookManager._trigger_post_backward(ctx.params)
        return (None,) + grads


class ColoParamOpHookManager:
    hooks: tuple = tuple()

    @staticmethod
    def _trigger_pre_forward(params):
        for hook in ColoParamOpHookManager.hooks:
            hook.pre_forward(params)

    @staticmethod
    def _trigger_post_backward(params):
        for hook in ColoParamOpHookManager.hooks:
            hook.post_backward(params)

    @staticmethod
    def pre_op(params: List[torch.Tensor], *args):
        ColoParamOpHookManager._trigger_pre_forward(params)
        if torch.is_grad_enabled() and any(p.requires_grad for p in params):
            return PreFwdPostBwd.apply(params, *args)
        return args


class GeminiZeROHook(ColoParamOpHook):
    def __init__(self, gemini_manager: GeminiManager, max_prefetch: int = 0) -> None:
        super().__init__()
        self._gemini_manager = gemini_manager
        self._chunk_manager: ChunkManager = gemini_manager.chunk_manager
        self._max_prefetch = max_prefetch
        self._async_works = {}

    def wait_chunks(self, chunks):
        non_prefetched = []
        for chunk in chunks:
            if chunk in self._async_works:
                self._async_works.pop(chunk).wait()
            else:
                non_prefetched.append(chunk)
        return non_prefetched

    def pre_op(self, params):
        params = [p for p in params if not getattr(p, "_ignore", False)]
        all_chunks = self._chunk_manager.get_chunks(params)
        chunks_fetch_sync = self.wait_chunks(all_chunks)
        for p in params:
            self._chunk_manager.trans_tensor_state(p, TensorState.COMPUTE)
        self._gemini_manager.sample_overall_data()
        self._gemini_manager.adjust_layout(chunks_fetch_sync)

        max_prefetch = self._max_prefetch if torch.is_grad_enabled() else 0
        chunks_fetch_async = self._gemini_manager.placement_policy.get_prefetch_chunks(max_prefetch=max_prefetch)
        for chunk in chunks_fetch_async:
            maybe_work = self._chunk_manager.access_chunk(chunk, async_access=True)
            if maybe_work is not None:
                self._async_works[chunk] = maybe_work
        for chunk in chunks_fetch_sync:
            self._chunk_manager.access_chunk(chunk)
        self._gemini_manager.record_model_data_volume()

    def pre_forward(self, params):
        self.pre_op(params)

    def post_backward(self, params):
        for p in params:
            self._chunk_manager.trans_tensor_state(p, TensorState.READY_FOR_REDUCE)
