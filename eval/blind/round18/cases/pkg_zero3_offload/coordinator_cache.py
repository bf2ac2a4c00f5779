# adapted from microsoft/DeepSpeed deepspeed/runtime/zero/parameter_offload.py
from .partitioned_param_coordinator import PartitionedParameterCoordinator


class CoordinatorCacheMixin:
    """Keeps one parameter coordinator (and therefore one recorded prefetch
    trace) per execution mode."""

    def get_param_coordinator(self, training):
        key = "train" if training else "eval"
        if key not in self.param_coordinators:
            self.param_coordinators[key] = PartitionedParameterCoordinator(
                prefetch_bucket_sz=self._prefetch_bucket_sz,
                max_reuse_distance_in_numel=self._max_reuse_distance_in_numel,
                max_available_parameters_in_numel=self._max_available_parameters_in_numel,
                allgather_stream=self.__allgather_stream,
                inflight_param_registry=self.__inflight_param_registry,
                prefetch_nvme=self.offload_device == "nvme",
                timers=self.timers,
                zero_quantized_weights=self.zero_quantized_weights,
                zero_quantized_nontrainable_weights=self.zero_quantized_nontrainable_weights,
            )
        return self.param_coordinators[key]
