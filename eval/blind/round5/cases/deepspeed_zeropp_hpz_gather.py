"""Modelled on DeepSpeed deepspeed/runtime/zero/partition_parameters.py
(Init._convert_to_deepspeed_param.all_gather_coalesced with ZeRO++ hpZ secondary partitions)."""
import torch
import torch.distributed as dist

from deepspeed.runtime.zero.partition_parameters import (
    AllGatherCoalescedHandle,
    ZeroParamStatus,
    _no_gather_coalesced,
)
from deepspeed.utils import instrument_w_nvtx


class ZeroParamGatherMixin:
    """Methods bound onto every ZeRO-3 parameter."""

    def __init__(self, ds_process_group, ds_secondary_process_group, quantizer_module=None):
        self.ds_process_group = ds_process_group
        self.ds_secondary_process_group = ds_secondary_process_group
        self.quantizer_module = quantizer_module

    @instrument_w_nvtx
    def all_gather_coalesced(self, params, safe_mode: bool = False, quantize: bool = False):
        # "forward" historically meant "not inside backward"; it is read from grad mode here
        forward = torch.is_grad_enabled()
        if len(params) == 0:
            return _no_gather_coalesced(params)

        # hpZ: the backward re-gather uses the intra-node secondary partition
        use_secondary_tensor = params[0].ds_secondary_tensor is not None and not forward
        ds_process_group = self.ds_secondary_process_group if use_secondary_tensor else self.ds_process_group
        world_size = dist.get_world_size(group=ds_process_group)
        rank_in_group = dist.get_rank(group=ds_process_group)

        for p in params:
            p.ds_status = ZeroParamStatus.INFLIGHT

        partitions = []
        for param in params:
            shard = param.ds_secondary_tensor if use_secondary_tensor else param.ds_tensor
            partition_sz = shard.ds_numel
            flat = torch.empty(partition_sz * world_size, dtype=param.dtype, device=shard.device)
            partitions.append((param, flat, shard))

        handles = []
        for param, flat, shard in partitions:
            handles.append(
                dist.all_gather_into_tensor(
                    flat, shard.data.view(-1), group=ds_process_group, async_op=True
                )
            )
        return AllGatherCoalescedHandle(
            allgather_handle=handles,
            params=params,
            partitions=[flat for _, flat, _ in partitions],
            world_size=world_size,
            use_secondary_tensor=use_secondary_tensor,
        )
