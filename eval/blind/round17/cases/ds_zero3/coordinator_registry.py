# adapted from microsoft/DeepSpeed deepspeed/runtime/zero/parameter_offload.py
from .partitioned_param_coordinator import PartitionedParameterCoordinator, InflightParamRegistry


class ParamCoordinatorRegistry:
    """Keeps one coordinator (and thus one recorded prefetch trace) per mode."""

    def __init__(self, prefetch_bucket_sz, max_reuse_distance_in_numel, max_available_parameters_in_numel,
                 allgather_stream):
        kwargs = dict(
            prefetch_bucket_sz=prefetch_bucket_sz,
            max_reuse_distance_in_numel=max_reuse_distance_in_numel,
            max_available_parameters_in_numel=max_available_parameters_in_numel,
            allgather_stream=allgather_stream,
        )
        self._train_coordinator = PartitionedParameterCoordinator(
            inflight_param_registry=InflightParamRegistry(), **kwargs)
        self._eval_coordinator = PartitionedParameterCoordinator(
            inflight_param_registry=InflightParamRegistry(), **kwargs)

    def get_param_coordinator(self, training):
        return self._train_coordinator if training else self._eval_coordinator
