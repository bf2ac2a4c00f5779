# Modelled on Megatron-LM megatron/core/distributed/fsdp/src/megatron_fsdp/param_and_grad_buffer.py (AllGatherPipeline)
from enum import Enum
from typing import List, Optional

import torch


class PrefetchOrder(Enum):
    FORWARD_PASS_ORDER = 0
    BACKWARD_PASS_ORDER = 1


class BucketStatus(Enum):
    EMPTY = 1
    COMMUNICATING = 2
    READY_TO_USE = 3


class AllGatherPipeline:
    def __init__(self, param_and_grad_buffer, ag_stream: Optional[torch.cuda.Stream] = None):
        self.buffer = param_and_grad_buffer
        self.ag_stream = ag_stream
        self.bucket_status = {}
        self.bucket_can_be_released = {}
        self.param_gather_event_map = {}
        self.bucket_to_bucket_group = self.buffer.bucket_to_bucket_group

    def get_bucket_key(self, bucket_id, bwd):
        return (bucket_id, bwd)

    def _all_gather_bucket(self, bucket_id: int, bwd: bool, async_op: bool):
        group = self.buffer.parameter_groups[bucket_id]
        wbuf = group.model_weight_buffer
        self.bucket_status[self.get_bucket_key(bucket_id, bwd)] = BucketStatus.COMMUNICATING
        return torch.distributed.all_gather_into_tensor(
            output_tensor=wbuf.fetch_bucket().data,
            input_tensor=wbuf.get_shard_from_local_buffer(),
            group=wbuf.data_parallel_group,
            async_op=async_op,
        )

    def all_gather_params(self, params: List[torch.Tensor], prefetch: bool = False,
                          prefetch_order: PrefetchOrder = PrefetchOrder.FORWARD_PASS_ORDER,
                          suggested_AG_prefetch_size: Optional[int] = None, bwd: bool = False,
                          grad_enabled: bool = True):
        if len(params) == 0:
            return
        ag_buckets = sorted(set(self.buffer.param_to_param_group[item] for item in params))
        parameter_groups = self.buffer.parameter_groups
        for bucket_id in ag_buckets:
            self.bucket_can_be_released[self.get_bucket_key(bucket_id, bwd)] = False

        if prefetch:
            def next_bucket_id(ag_buckets):
                if prefetch_order == PrefetchOrder.FORWARD_PASS_ORDER:
                    bucket_id = ag_buckets[-1] + 1
                else:
                    bucket_id = ag_buckets[0] - 1
                if bucket_id < 0 or bucket_id >= self.buffer.num_buckets:
                    return None
                return bucket_id

            if suggested_AG_prefetch_size is None:
                suggested_AG_prefetch_size = 500_000_000
            base_all_gather_size = sum(parameter_groups[i].model_weight_buffer.bucket_index.size for i in ag_buckets)
            bucket_id = next_bucket_id(ag_buckets)
            while bucket_id is not None and (grad_enabled or bwd):
                prefetch_all_gather_size = (
                    sum(parameter_groups[i].model_weight_buffer.bucket_index.size for i in ag_buckets)
                    - base_all_gather_size
                )
                if prefetch_all_gather_size >= suggested_AG_prefetch_size:
                    break
                ag_buckets.extend(self.buffer.bucket_to_bucket_group[bucket_id])
                ag_buckets = sorted(set(ag_buckets))
                bucket_id = next_bucket_id(ag_buckets)

        ag_buckets = [
            bucket_id for bucket_id in ag_buckets
            if self.bucket_status.get(self.get_bucket_key(bucket_id, bwd), BucketStatus.EMPTY) == BucketStatus.EMPTY
        ]
        if not ag_buckets:
            return

        all_gather_stream = (
            self.ag_stream if (self.ag_stream is not None and grad_enabled) else torch.cuda.current_stream()
        )
        all_gather_stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(all_gather_stream):
            handles = [self._all_gather_bucket(b, bwd, async_op=grad_enabled or bwd) for b in ag_buckets]
            for bucket_id, handle in zip(ag_buckets, handles):
                event = torch.cuda.Event()
                event.record()
                self.param_gather_event_map[self.get_bucket_key(bucket_id, bwd)] = (event, handle)

    def wait_bucket_ready(self, bucket_id, bwd):
        key = self.get_bucket_key(bucket_id, bwd)
        if self.bucket_status.get(key) == BucketStatus.READY_TO_USE:
            return
        event, handle = self.param_gather_event_map.pop(key)
        if handle is not None:
            handle.wait()
        torch.cuda.current_stream().wait_event(event)
        self.bucket_status[key] = BucketStatus.READY_TO_USE

    def release_bucket(self, bucket_id, bwd, lazy=False):
        key = self.get_bucket_key(bucket_id, bwd)
        if self.bucket_status.get(key) == BucketStatus.EMPTY:
            return
        self.buffer.parameter_groups[bucket_id].model_weight_buffer.free_bucket_storage()
        self.bucket_status[key] = BucketStatus.EMPTY
