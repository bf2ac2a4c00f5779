import torch

from .chunk import ChunkManager


class GeminiZeROHook:

    def __init__(self, chunk_manager: ChunkManager, param_to_chunk, max_prefetch=2):
        self._chunk_manager = chunk_manager
        self._param_to_chunk = param_to_chunk
        self._max_prefetch = max_prefetch
        self._grad_phase = True
        self._order = []

    def pre_forward(self, module, inputs):
        self._grad_phase = torch.is_grad_enabled()

    def pre_op(self, params):
        chunks = [self._param_to_chunk[p] for p in params]
        depth = self._max_prefetch if self._grad_phase else 0
        upcoming = self._order[len(self._chunk_manager.accessed_chunks):][:depth]
        for chunk in list(chunks) + upcoming:
            self._chunk_manager.access_chunk(chunk, async_access=self._grad_phase)
        for chunk in chunks:
            self._chunk_manager.wait_chunk(chunk)
        if self._grad_phase:
            for p in params:
                if p.requires_grad:
                    p.register_post_accumulate_grad_hook(self._post_backward)

    def _post_backward(self, param):
        chunk = self._param_to_chunk[param]
        chunk.total = None
        chunk.is_gathered = False
