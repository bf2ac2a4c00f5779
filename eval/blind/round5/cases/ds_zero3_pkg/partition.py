import torch
import torch.distributed as dist

from deepspeed.runtime.zero.partition_parameters import AllGatherCoalescedHandle, ZeroParamStatus


def all_gather_coalesced(params, forward: bool = True, quantize: bool = False):
    for p in params:
        p.ds_status = ZeroParamStatus.INFLIGHT
    # hpZ: non-forward gathers read the intra-node secondary shard
    use_secondary_tensor = params[0].ds_secondary_tensor is not None and not forward
    if use_secondary_tensor:
        ds_process_group = params[0].ds_secondary_tensor_group
        shards = [p.ds_secondary_tensor for p in params]
    else:
        ds_process_group = params[0].ds_process_group
        shards = [p.ds_tensor for p in params]
    world_size = dist.get_world_size(group=ds_process_group)
    flat_shard = torch.cat([s.data.view(-1) for s in shards])
    flat_full = torch.empty(flat_shard.numel() * world_size, dtype=flat_shard.dtype, device=flat_shard.device)
    handle = dist.all_gather_into_tensor(flat_full, flat_shard, group=ds_process_group, async_op=True)
    return AllGatherCoalescedHandle(
        allgather_handle=handle,
        params=params,
        partitions=flat_full.chunk(world_size),
        world_size=world_size,
        use_secondary_tensor=use_secondary_tensor,
    )
