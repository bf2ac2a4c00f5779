# Modelled on deepspeed/runtime/zero/partition_parameters.py all_gather_coalesced (DeepSpeed v0.12, ZeRO++ hpZ).
import torch

from deepspeed import comm as dist
from deepspeed.runtime.zero.partition_parameters import AllGatherCoalescedHandle, ZeroParamStatus


def _dist_allgather_fn(input_tensor, output_tensor, group):
    return dist.allgather_fn(output_tensor, input_tensor, group=group, async_op=True)


@torch.no_grad()
def all_gather_coalesced(params, safe_mode: bool = False, quantize: bool = False, forward: bool = True):
    for param in params:
        if param.ds_status != ZeroParamStatus.NOT_AVAILABLE:
            raise RuntimeError(param.ds_summary())
        param.ds_status = ZeroParamStatus.INFLIGHT
    params = sorted(params, key=lambda p: p.ds_id)

    use_secondary_tensor = params[0].ds_secondary_tensor is not None and not forward
    ds_process_group = params[0].ds_process_group
    if use_secondary_tensor:
        ds_process_group = params[0].ds_secondary_tensor_group
    world_size = dist.get_world_size(group=ds_process_group)
    rank_in_group = dist.get_rank(group=ds_process_group)

    partition_sz = sum(
        (p.ds_secondary_tensor.ds_numel if use_secondary_tensor else p.ds_tensor.ds_numel) for p in params
    )
    flat_tensor = torch.empty(partition_sz * world_size, dtype=params[0].dtype, device=params[0].device,
                              requires_grad=False)
    partitions = [flat_tensor.narrow(0, partition_sz * i, partition_sz) for i in range(world_size)]
    instrument_w_nvtx(torch.cat)(
        [(p.ds_secondary_tensor if use_secondary_tensor else p.ds_tensor).to(params[0].device) for p in params],
        out=partitions[rank_in_group],
    )
    handle = _dist_allgather_fn(partitions[rank_in_group], flat_tensor, ds_process_group)
    return AllGatherCoalescedHandle(allgather_handle=handle, params=params, partitions=partitions,
                                    world_size=world_size, use_secondary_tensor=use_secondary_tensor)


def instrument_w_nvtx(func):
    return func
