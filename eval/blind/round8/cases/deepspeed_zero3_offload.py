import torch

from deepspeed.runtime.zero.partitioned_param_coordinator import PartitionedParameterCoordinator
from deepspeed.runtime.zero.parameter_offload import PreBackwardFunctionForModule, PostBackwardFunctionModule
from deepspeed.utils import instrument_w_nvtx


class DeepSpeedZeRoOffload:

    def __init__(self, module, timers, ds_config, prefetch_bucket_size, max_reuse_distance,
                 max_live_parameters, inference_prefetch_bucket_size=0, zero_module_granularity_threshold=0):
        self.module = module
        self.timers = timers
        self.ds_config = ds_config
        self._prefetch_bucket_sz = int(prefetch_bucket_size)
        self._inference_prefetch_bucket_sz = int(inference_prefetch_bucket_size)
        self._max_reuse_distance_in_numel = int(max_reuse_distance)
        self._max_available_parameters_in_numel = int(max_live_parameters)
        self.param_coordinators = {}

    def get_param_coordinator(self, training):
        if training not in self.param_coordinators:
            bucket = self._prefetch_bucket_sz if training else self._inference_prefetch_bucket_sz
            self.param_coordinators[training] = PartitionedParameterCoordinator(
                prefetch_bucket_sz=bucket,
                max_reuse_distance_in_numel=self._max_reuse_distance_in_numel,
                max_available_parameters_in_numel=self._max_available_parameters_in_numel,
                allgather_stream=torch.cuda.Stream(),
                inflight_param_registry={},
                prefetch_nvtx=True,
                timers=self.timers,
            )
        return self.param_coordinators[training]

    @instrument_w_nvtx
    def pre_sub_module_forward_function(self, sub_module):
        param_coordinator = self.get_param_coordinator(training=torch.is_grad_enabled())
        param_coordinator.trace_prologue(sub_module)
        if param_coordinator.is_record_trace():
            param_coordinator.record_module(sub_module)
        param_coordinator.fetch_sub_module(sub_module, forward=True)

    @instrument_w_nvtx
    def post_sub_module_forward_function(self, sub_module):
        param_coordinator = self.get_param_coordinator(training=torch.is_grad_enabled())
        param_coordinator.release_sub_module(sub_module, forward=True)

    def _pre_backward_module_hook(self, module, inputs, outputs):
        if not torch._C.is_grad_enabled():
            return outputs
        return PreBackwardFunctionForModule.apply(module, outputs)

    def _register_hooks(self, module):
        def _pre_forward_hook(mod, *args):
            self.pre_sub_module_forward_function(mod)

        def _post_forward_hook(mod, inputs, outputs):
            self.post_sub_module_forward_function(mod)
            return self._pre_backward_module_hook(mod, inputs, outputs)

        module.register_forward_pre_hook(_pre_forward_hook)
        module.register_forward_hook(_post_forward_hook)
