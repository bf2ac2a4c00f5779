import torch


class SchedulerHook:
    def before_forward(self, scheduler, inputs) -> None:
        pass

    def after_forward(self, scheduler, outputs) -> None:
        pass

    def before_backward(self, scheduler, outputs, outputs_grad) -> None:
        pass

    def after_backward(self, scheduler, inputs_grad) -> None:
        pass


class ISPCommunicatorSchedulerHook(SchedulerHook):
    def __init__(self, overlap_handler, zero_optim) -> None:
        self._isp_communicator = overlap_handler
        self._zero_optim = zero_optim

    def before_forward(self, scheduler, inputs) -> None:
        self._isp_communicator.is_forward = True
        self._isp_communicator.grad_enabled = torch.is_grad_enabled()
        self._isp_communicator.switch_current_model_chunk(0)

    def after_forward(self, scheduler, outputs) -> None:
        pass

    def before_backward(self, scheduler, outputs, outputs_grad) -> None:
        self._isp_communicator.is_forward = False
        self._isp_communicator.switch_current_model_chunk(0)

    def after_backward(self, scheduler, inputs_grad) -> None:
        self._zero_optim.accumulate_left_grads_after_backward()
        if self._isp_communicator.enable_memory_pool:
            self._isp_communicator.memory_pool.reset_lazy_pools()
