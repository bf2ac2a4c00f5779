# Modelled on colossalai/pipeline/schedule/one_f_one_b.py OneForwardOneBackwardSchedule (ColossalAI v0.4).
from typing import Any, Callable, Iterable, Optional

import torch
from torch.nn import Module

from .p2p import PipelineP2PCommunication


class OneForwardOneBackwardSchedule:
    def __init__(self, stage_manager, num_microbatches: Optional[int] = None, overlap_p2p: bool = True):
        self.stage_manager = stage_manager
        self.comm = PipelineP2PCommunication(stage_manager, overlap_p2p=overlap_p2p)
        self.num_microbatches = num_microbatches
        self.send_tensor_metadata = True
        self.input_tensors = []
        self.output_tensors = []

    def forward_step(self, model: Module, input_obj: Optional[dict], criterion: Callable,
                     accum_loss: Optional[torch.Tensor] = None, outputs: Optional[list] = None):
        output_obj = model(**(input_obj or {}))
        if self.stage_manager.is_last_stage():
            loss = criterion(output_obj, None) / self.num_microbatches
            if accum_loss is not None:
                accum_loss.add_(loss.detach())
            return loss
        return output_obj

    def run_forward_only(self, model_chunk: Module, data_iter: Iterable, criterion: Callable,
                         return_loss: bool = False, return_outputs: bool = False):
        grad_on = torch.is_grad_enabled()
        accum_loss = torch.scalar_tensor(0, device=torch.cuda.current_device()) if return_loss else None
        outputs = [] if return_outputs else None
        for _ in range(self.num_microbatches):
            input_obj = next(data_iter)
            output_obj = self.forward_step(model_chunk, input_obj, criterion, accum_loss, outputs)
            if not self.stage_manager.is_last_stage():
                self.comm.send_forward(output_obj, send_metadata=self.send_tensor_metadata, grad_on=grad_on)
                self.send_tensor_metadata = False
            if grad_on:
                self.input_tensors.append(input_obj)
                self.output_tensors.append(output_obj)
        return {"loss": accum_loss, "outputs": outputs}
