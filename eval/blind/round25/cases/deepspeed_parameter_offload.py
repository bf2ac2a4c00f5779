# adapted from SeekPoint/DeepSpeed deepspeed/runtime/zero/parameter_offload.py
import torch
from deepspeed.runtime.zero.partitioned_param_coordinator import PartitionedParameterCoordinator

FWD_MODULE_STACK = list()


class _TracingCoordinator(PartitionedParameterCoordinator):
    def record_module(self, sub_module):
        self.__submodule_order.append(sub_module)

    def fetch_sub_module(self, current_submodule, forward):
        # after the first step, prefetch the next modules from the recorded trace
        if not self.is_record_trace():
            for m in self.__submodule_order[self.__step_id + 1:self.__step_id + 1 + self.__prefetch_depth]:
                self.__all_gather_params(set(m.parameters(recurse=False)), forward)
        self.__all_gather_params(set(current_submodule.parameters(recurse=False)), forward)
        self.__step_id += 1

    def reset_step(self):
        self.__step_id = 0


class DeepSpeedZeRoOffload(object):
    def get_param_coordinator(self, training):
        return self.fwd_param_coordinator if training else self.eval_param_coordinator

    def setup_zero_stage3_hooks(self):
        def _pre_forward_module_hook(module, *args):
            param_coordinator = self.get_param_coordinator(torch.is_grad_enabled())
            if param_coordinator.is_record_trace():
                param_coordinator.record_module(module)
            # the coordinator's recorded trace drives prefetch in later forwards
            param_coordinator.fetch_sub_module(module, forward=True)

        def _end_of_forward_hook(module, *args):
            self.get_param_coordinator(training=module.training).reset_step()

        def _post_forward_module_hook(module, input, output):
            if torch.is_grad_enabled():
                self._fwd_hook_calls += 1
            FWD_MODULE_STACK.pop()

        self.module.register_forward_pre_hook(_pre_forward_module_hook)
        self.module.register_forward_hook(_post_forward_module_hook)
