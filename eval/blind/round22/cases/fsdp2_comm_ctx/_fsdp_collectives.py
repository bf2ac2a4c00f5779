# adapted from pytorch/pytorch torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py
import torch
import torch.distributed as dist


def foreach_all_gather(fsdp_params, group, async_op, all_gather_copy_in_stream, all_gather_stream, device):
    world_size, rank = group.size(), group.rank()
    with torch.cuda.stream(all_gather_copy_in_stream):
        inp_split_sizes = [p.all_gather_inputs[0].numel() for p in fsdp_params]
        all_gather_input_numel = sum(inp_split_sizes)
        all_gather_output = torch.empty((all_gather_input_numel * world_size,), device=device)
        all_gather_input = all_gather_output.narrow(0, all_gather_input_numel * rank, all_gather_input_numel)
        torch.cat([p.all_gather_inputs[0] for p in fsdp_params], out=all_gather_input)
        copy_in_event = all_gather_copy_in_stream.record_event()
    with torch.cuda.stream(all_gather_stream):
        all_gather_stream.wait_event(copy_in_event)
        work = dist.all_gather_into_tensor(all_gather_output, all_gather_input, group=group, async_op=async_op)
        all_gather_event = all_gather_stream.record_event()
    return all_gather_output, all_gather_event, work


def foreach_all_gather_copy_out(all_gather_result, fsdp_params, group):
    all_gather_output, all_gather_event, work = all_gather_result
    if all_gather_event is not None:
        torch.cuda.current_stream().wait_event(all_gather_event)
    if work is not None:
        work.wait()
