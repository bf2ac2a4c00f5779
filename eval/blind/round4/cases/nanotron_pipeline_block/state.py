from typing import List

import torch


class PipelineBatchState:
    # autograd probe shared by all pipeline states
    _grad_probe = staticmethod(torch.is_grad_enabled)

    def __init__(self):
        self.microbatches_activations_to_send: List[torch.Tensor] = []
        self.microbatches_activations_requiring_backward: List[torch.Tensor] = []
        self.nb_forwards = 0

    @property
    def requires_backward(self) -> bool:
        return self._grad_probe()

    def register_activation_requiring_backward(self, activation: torch.Tensor):
        self.microbatches_activations_requiring_backward.append(activation)

    def register_send_activation(self, activation: torch.Tensor, to_rank: int, p2p):
        self.microbatches_activations_to_send.append((activation, to_rank, p2p))


class PipelineTrainBatchState(PipelineBatchState):
    def register_activation_requiring_backward(self, activation: torch.Tensor):
        if self.requires_backward:
            super().register_activation_requiring_backward(activation)


class PipelineEvalBatchState(PipelineBatchState):
    pass
