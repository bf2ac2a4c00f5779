import torch

from deepspeed.runtime.zero.partitioned_param_coordinator import PartitionedParameterCoordinator
from deepspeed.runtime.zero.partition_parameters import ZeroParamStatus
from deepspeed.utils import instrument_w_nvtx
from deepspeed.runtime.utils import apply_to_tensors_only


class PreBackwardFunctionForModule(torch.autograd.Function):
    @staticmethod
    def forward(ctx, module, pre_backward_function, outputs):
        ctx.module = module
        ctx.pre_backward_function = pre_backward_function
        module.applied_pre_backward_ref_cnt += 1
        return outputs.detach()

    @staticmethod
    def backward(ctx, *args):
        ctx.pre_backward_function(ctx.module)
        return (None, None) + args


class DeepSpeedZeRoOffload(object):
    def __init__(self, module, prefetch_bucket_size=50_000_000, max_reuse_distance=1_000_000_000,
                 max_live_parameters=1_000_000_000, overlap_comm=True):
        self.module = module
        self._prefetch_bucket_sz = int(prefetch_bucket_size)
        self._max_reuse_distance_in_numel = int(max_reuse_distance)
        self._max_available_parameters_in_numel = int(max_live_parameters)
        self.__allgather_stream = torch.cuda.Stream() if overlap_comm else torch.cuda.default_stream()
        self.param_coordinators = {}
        self.forward_hooks = []
        self.backward_hooks = []

    def get_param_coordinator(self, training):
        coordinator = self.param_coordinators.get(training)
        if coordinator is None:
            coordinator = PartitionedParameterCoordinator(
                prefetch_bucket_sz=self._prefetch_bucket_sz if training else 0,
                max_reuse_distance_in_numel=self._max_reuse_distance_in_numel,
                max_available_parameters_in_numel=self._max_available_parameters_in_numel,
                allgather_stream=self.__allgather_stream,
                prefetch_nvme=False,
            )
            self.param_coordinators[training] = coordinator
        return coordinator

    def _register_hooks_recursively(self, module, count=[0]):
        my_count = count[0]
        module.id = my_count
        for child in module.children():
            count[0] = count[0] + 1
            self._register_hooks_recursively(child, count=count)

        def _pre_forward_module_hook(module, *args):
            self.pre_sub_module_forward_function(module, torch.is_grad_enabled())

        def _post_forward_module_hook(module, input, output):
            output = self._attach_pre_backward(module, output)
            self.post_sub_module_forward_function(module, torch.is_grad_enabled())
            return output

        self.forward_hooks.append(module.register_forward_pre_hook(_pre_forward_module_hook))
        self.forward_hooks.append(module.register_forward_hook(_post_forward_module_hook))

    def _attach_pre_backward(self, module, output):
        if not torch.is_grad_enabled():
            return output
        if not hasattr(module, "applied_pre_backward_ref_cnt"):
            module.applied_pre_backward_ref_cnt = 0

        def _run_before_backward_function(sub_module):
            if sub_module.applied_pre_backward_ref_cnt > 0:
                self.pre_sub_module_backward_function(sub_module)
                sub_module.applied_pre_backward_ref_cnt -= 1

        return apply_to_tensors_only(
            lambda t: PreBackwardFunctionForModule.apply(module, _run_before_backward_function, t), output
        )

    @torch.no_grad()
    def pre_sub_module_forward_function(self, sub_module, training):
        param_coordinator = self.get_param_coordinator(training=training)
        param_coordinator.trace_prologue(sub_module)
        if param_coordinator.is_record_trace():
            param_coordinator.record_module(sub_module)
        param_coordinator.fetch_sub_module(sub_module, forward=True)

    @torch.no_grad()
    def post_sub_module_forward_function(self, sub_module, training):
        param_coordinator = self.get_param_coordinator(training=training)
        param_coordinator.release_sub_module(sub_module)

    @torch.no_grad()
    def pre_sub_module_backward_function(self, sub_module):
        param_coordinator = self.get_param_coordinator(training=True)
        param_coordinator.trace_prologue(sub_module)
        if param_coordinator.is_record_trace():
            param_coordinator.record_module(sub_module)
        param_coordinator.fetch_sub_module(sub_module, forward=False)

    @instrument_w_nvtx
    def partition_all_parameters(self):
        for coordinator in self.param_coordinators.values():
            coordinator.release_and_reset_all(self.module)
        for param in self.module.parameters(recurse=True):
            if param.ds_status != ZeroParamStatus.NOT_AVAILABLE:
                raise RuntimeError(f"{param.ds_summary()} expected to be released")
