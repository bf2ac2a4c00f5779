"""Pipelined sparse data distribution for sharded embedding models."""
from collections import deque
from typing import Deque, Iterator, Optional

import torch

from torchrec.distributed.train_pipeline.utils import (
    _start_data_dist,
    _wait_for_batch,
    TrainPipelineContext,
)


class SparseDistPipeline:
    def __init__(self, model, optimizer, device: torch.device, execute_all_batches: bool = True):
        self._model = model
        self._optimizer = optimizer
        self._device = device
        self._execute_all_batches = execute_all_batches
        self._memcpy_stream = torch.cuda.Stream(priority=-1) if device.type == "cuda" else None
        self._data_dist_stream = torch.cuda.Stream(priority=-1) if device.type == "cuda" else None
        self._pipelined_modules = []
        self.batches: Deque = deque()
        self.contexts: Deque[TrainPipelineContext] = deque()

    @property
    def _grad_on(self) -> bool:
        return torch.is_grad_enabled()

    def _dist_stream(self) -> Optional[torch.cuda.Stream]:
        if self._data_dist_stream is None:
            return None
        return self._data_dist_stream if self._grad_on else torch.cuda.current_stream()

    def _copy_batch_to_gpu(self, dataloader_iter: Iterator):
        with torch.cuda.stream(self._memcpy_stream):
            batch = next(dataloader_iter, None)
            if batch is not None:
                batch = batch.to(self._device, non_blocking=True)
        return batch

    def start_sparse_data_dist(self, batch, context: TrainPipelineContext) -> None:
        if batch is None:
            return
        stream = self._dist_stream()
        with torch.cuda.stream(stream):
            _wait_for_batch(batch, self._memcpy_stream)
            _start_data_dist(self._pipelined_modules, batch, context)

    def enqueue_batch(self, dataloader_iter: Iterator) -> bool:
        batch = self._copy_batch_to_gpu(dataloader_iter)
        if batch is None:
            return False
        context = TrainPipelineContext(index=len(self.batches))
        self.batches.append(batch)
        self.contexts.append(context)
        return True

    def progress(self, dataloader_iter: Iterator):
        if not self.batches:
            self.enqueue_batch(dataloader_iter)
            self.start_sparse_data_dist(self.batches[0], self.contexts[0])
        self.enqueue_batch(dataloader_iter)
        if self._model.training:
            self._optimizer.zero_grad()
        _wait_for_batch(self.batches[0], self._data_dist_stream)
        if len(self.batches) >= 2:
            self.start_sparse_data_dist(self.batches[1], self.contexts[1])
        losses, output = self._model(self.batches[0])
        if self._model.training:
            torch.sum(losses, dim=0).backward()
            self._optimizer.step()
        self.batches.popleft()
        self.contexts.popleft()
        return output
