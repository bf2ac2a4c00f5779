# adapted from microsoft/DeepSpeed deepspeed/runtime/zero/parameter_offload.py
import torch
from deepspeed.runtime.zero.partition_parameters import *
from deepspeed.runtime.zero.partitioned_param_coordinator import PartitionedParameterCoordinator, InflightParamRegistry
from deepspeed.runtime.zero.offload_config import OffloadDeviceEnum
from deepspeed.accelerator import get_accelerator

FWD_MODULE_STACK = list()


class DeepSpeedZeRoOffload(object):

    def __init__(self, module, timers, ds_config, overlap_comm=True, prefetch_bucket_size=50000000,
                 max_reuse_distance=1000000000, max_live_parameters=1000000000):
        self.module = module
        self.timers = timers
        self.offload_device = None
        self.param_coordinators = {}
        self._prefetch_bucket_sz = int(prefetch_bucket_size)
        self._max_reuse_distance_in_numel = int(max_reuse_distance)
        self._max_available_parameters_in_numel = int(max_live_parameters)
        self.__allgather_stream = None if get_accelerator().is_synchronized_device() else get_accelerator().Stream(
        ) if overlap_comm else get_accelerator().default_stream()
        if not hasattr(module, "ds_inflight_param_registry"):
            module.ds_inflight_param_registry = dict()
            module.ds_inflight_param_registry[True] = InflightParamRegistry()
            module.ds_inflight_param_registry[False] = InflightParamRegistry()
        self.__inflight_param_registry = module.ds_inflight_param_registry
        self.forward_hooks = []
        self.setup_zero_stage3_hooks()

    def get_param_coordinator(self, training):
        if not training in self.param_coordinators:
            self.param_coordinators[training] = PartitionedParameterCoordinator(
                prefetch_bucket_sz=self._prefetch_bucket_sz,
                max_reuse_distance_in_numel=self._max_reuse_distance_in_numel,
                max_available_parameters_in_numel=self._max_available_parameters_in_numel,
                allgather_stream=self.__allgather_stream,
                inflight_param_registry=self.__inflight_param_registry[training],
                prefetch_nvme=self.offload_device == OffloadDeviceEnum.nvme,
                timers=self.timers,
            )
        return self.param_coordinators[training]

    def setup_zero_stage3_hooks(self):

        def _end_of_forward_hook(module, *args):
            if not self.module.training:
                self.get_param_coordinator(training=False).reset_step()

        self._register_hooks_recursively(self.module)
        self.module.register_forward_hook(_end_of_forward_hook)
        global FWD_MODULE_STACK
        FWD_MODULE_STACK.append(self.module)

    def _register_hooks_recursively(self, module, count=[0]):
        for child in module.children():
            self._register_hooks_recursively(child, count=count)

        def _pre_forward_module_hook(module, *args):
            self.pre_sub_module_forward_function(module)

        def _post_forward_module_hook(module, input, output):
            self.post_sub_module_forward_function(module)

        self.forward_hooks.append(module.register_forward_pre_hook(_pre_forward_module_hook))
        self.forward_hooks.append(module.register_forward_hook(_post_forward_module_hook))

    @torch.no_grad()
    def pre_sub_module_forward_function(self, sub_module):
        global FWD_MODULE_STACK
        FWD_MODULE_STACK.append(sub_module)
        param_coordinator = self.get_param_coordinator(training=sub_module.training)
        param_coordinator.trace_prologue(sub_module)
        if param_coordinator.is_record_trace():
            param_coordinator.record_module(sub_module)
        param_coordinator.fetch_sub_module(sub_module, forward=True)

    def post_sub_module_forward_function(self, sub_module):
        param_coordinator = self.get_param_coordinator(training=torch.is_grad_enabled())
        if param_coordinator.is_record_trace():
            param_coordinator.record_module(sub_module)
        param_coordinator.release_sub_module(sub_module, forward=True)
