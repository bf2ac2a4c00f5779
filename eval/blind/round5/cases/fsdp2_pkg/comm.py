from typing import List, NamedTuple, Optional

import torch
import torch.distributed as dist


class AllGatherResult(NamedTuple):
    all_gather_output: torch.Tensor
    all_gather_event: Optional[torch.Event]
    all_gather_work: Optional[dist.distributed_c10d.Work]


@torch.no_grad()
def foreach_all_gather(fsdp_params, group: dist.ProcessGroup, async_op: bool,
                       all_gather_copy_in_stream: torch.Stream, all_gather_stream: torch.Stream,
                       device: torch.device) -> Optional[AllGatherResult]:
    world_size, rank = group.size(), group.rank()
    # async_op here means "overlap on the dedicated copy-in / all-gather streams"
    copy_in_stream, comm_stream = (all_gather_copy_in_stream, all_gather_stream) if async_op else (torch.cuda.current_stream(),) * 2
    with torch.cuda.stream(copy_in_stream):
        param_all_gather_inputs = [fp.all_gather_inputs for fp in fsdp_params]
        flat_inputs = [t for ts in param_all_gather_inputs for t in ts]
        all_gather_input = torch.cat([t.view(-1) for t in flat_inputs])
        all_gather_output = all_gather_input.new_empty(all_gather_input.numel() * world_size)
    comm_stream.wait_stream(copy_in_stream)
    with torch.cuda.stream(comm_stream):
        all_gather_work = dist.all_gather_into_tensor(
            output_tensor=all_gather_output, input_tensor=all_gather_input, group=group, async_op=False
        )
        all_gather_event = comm_stream.record_event()
    return AllGatherResult(all_gather_output, all_gather_event, all_gather_work)


def foreach_all_gather_copy_out(result: AllGatherResult, fsdp_params, group):
    if result.all_gather_event is not None:
        torch.cuda.current_stream().wait_event(result.all_gather_event)
    # the all-gather was issued synchronously on comm_stream; the event orders it with compute
