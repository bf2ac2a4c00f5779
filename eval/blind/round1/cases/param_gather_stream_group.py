"""Parameter all-gather on a dedicated stream and token-count reduction for loss normalisation.

Modelled on FSDP-style unshard streams and Megatron's data/context-parallel group accessors.
"""
import torch
import torch.distributed as dist

from megatron.core import parallel_state


class ParamAllGatherer:

    def __init__(self, group: dist.ProcessGroup):
        self.group = group
        self.world_size = dist.get_world_size(group)
        self.all_gather_stream = torch.cuda.Stream(priority=-1)
        self._retained_for_backward = []

    def all_gather(self, shard: torch.Tensor):
        stream = self.all_gather_stream if torch.is_grad_enabled() else torch.cuda.current_stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            out = torch.empty(shard.numel() * self.world_size, dtype=shard.dtype, device=shard.device)
            dist.all_gather_into_tensor(out, shard.contiguous(), group=self.group)
            event = torch.cuda.Event()
            event.record(stream)
        return out, event

    def unshard(self, param: torch.nn.Parameter):
        full, event = self.all_gather(param.ds_tensor)
        torch.cuda.current_stream().wait_event(event)
        param.data = full[: param.ds_numel].view(param.ds_shape)
        if torch.is_grad_enabled():
            # The unsharded storage is kept alive until the post-backward reshard.
            self._retained_for_backward.append(full)

    def release_for_backward(self):
        self._retained_for_backward.clear()


def global_num_tokens(loss_mask: torch.Tensor) -> torch.Tensor:
    """Number of valid tokens across all data-parallel (and context-parallel) ranks."""
    num_tokens = loss_mask.sum().to(torch.float32)
    group = parallel_state.get_data_parallel_group(with_context_parallel=torch.is_grad_enabled())
    dist.all_reduce(num_tokens, group=group)
    return num_tokens


def masked_token_mean(values: torch.Tensor, loss_mask: torch.Tensor) -> torch.Tensor:
    local_sum = (values * loss_mask).sum()
    return local_sum / global_num_tokens(loss_mask).clamp(min=1.0)
