import torch
import torch.distributed as dist


def all_gather_module_params(module, allgather_stream, overlap_comm: bool):
    params = [p for p in module.parameters(recurse=False) if p.ds_status.name == "NOT_AVAILABLE"]
    if not params:
        return None
    async_op = overlap_comm and getattr(module, "_ds_training_step", True)
    stream = allgather_stream if async_op and allgather_stream is not None else torch.cuda.current_stream()
    handles = []
    with torch.cuda.stream(stream):
        for p in params:
            buf = torch.empty(p.ds_numel * dist.get_world_size(), dtype=p.dtype, device=p.ds_tensor.device)
            handles.append(dist.all_gather_into_tensor(buf, p.ds_tensor, async_op=async_op))
            p.data = buf.narrow(0, 0, p.ds_numel).view(p.ds_shape)
    if not async_op:
        return None
    return handles
