from typing import Any, Callable, Iterable, Optional

import torch

from .p2p import PipelineP2PCommunication


class OneForwardOneBackwardSchedule:
    def __init__(self, stage_manager, num_microbatches: int, enable_metadata_cache: bool = True):
        self.stage_manager = stage_manager
        self.comm = PipelineP2PCommunication(stage_manager)
        self.num_microbatches = num_microbatches
        self.enable_metadata_cache = enable_metadata_cache
        self.send_tensor_metadata = True
        self.tensor_metadata_recv = None

    def run_forward_only(self, model, data_iter, criterion, cache_metadata: bool):
        outputs = []
        for _ in range(self.num_microbatches):
            if not self.stage_manager.is_first_stage():
                input_obj, meta = self.comm.recv_forward(metadata_recv=self.tensor_metadata_recv)
                if cache_metadata:
                    self.tensor_metadata_recv = meta
            else:
                input_obj = next(data_iter)
            output_obj = model(input_obj)
            if not self.stage_manager.is_last_stage():
                self.comm.send_forward(output_obj, send_metadata=self.send_tensor_metadata)
                self.send_tensor_metadata = not cache_metadata
            outputs.append(output_obj)
        return outputs

    def run_forward_backward(self, model, data_iter, criterion, optimizer):
        raise NotImplementedError

    def forward_backward_step(self, model, data_iter: Iterable, criterion: Callable[..., Any],
                              optimizer=None, return_loss: bool = False, return_outputs: bool = False):
        forward_only = not torch.is_grad_enabled()
        if optimizer is None:
            assert forward_only, "Optimizer should be passed when doing backward."
        cache_metadata = self.enable_metadata_cache and not forward_only
        if forward_only:
            return self.run_forward_only(model, data_iter, criterion, cache_metadata)
        return self.run_forward_backward(model, data_iter, criterion, optimizer)
