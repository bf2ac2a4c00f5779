# adapted from facebookresearch/fairscale fairscale/nn/data_parallel/fully_sharded_data_parallel.py
import functools
from typing import Any, List, Optional, Tuple

import torch
import torch.distributed as dist
from torch.nn import Parameter

from fairscale.utils.containers import apply_to_tensors
from fairscale.utils.parallel import chunk_and_pad


class FullyShardedDataParallel(torch.nn.Module):
    def forward(self, *args: Any, **kwargs: Any) -> torch.Tensor:
        self._lazy_init()
        self._rebuild_full_params(overlap=torch.is_grad_enabled())
        outputs = self.module(*args, **kwargs)
        if self.reshard_after_forward:
            self._free_full_params()
        outputs = self._register_pre_backward_hooks(outputs)
        return outputs

    def _register_pre_backward_hooks(self, outputs: Any) -> Any:
        if not torch.is_grad_enabled():
            return outputs  # don't register hooks if grad isn't enabled

        def _register_hook(t: torch.Tensor) -> torch.Tensor:
            if t.requires_grad:
                t.register_hook(self._pre_backward_hook)
            return t

        return apply_to_tensors(_register_hook, outputs)

    @torch.no_grad()
    def _rebuild_full_params(self, force_full_precision: bool = False, overlap: bool = True) -> Optional[List[Tuple[torch.Tensor, bool]]]:
        output_tensors: List[Tuple[torch.Tensor, bool]] = []
        if self.has_full_params and not force_full_precision:
            return output_tensors
        self.has_full_params = True
        gather_stream = self._streams["all_gather"] if overlap else torch.cuda.current_stream()
        with torch.cuda.stream(gather_stream):
            if self.mixed_precision and not force_full_precision:
                self._cast_fp32_param_shards_to_fp16()
            for p in self.params:
                if not p._is_sharded:
                    continue
                p_data = p.data.to(p._full_param_padded.device, non_blocking=True)
                output_tensor = p._full_param_padded
                if hasattr(dist, "_all_gather_base"):
                    dist._all_gather_base(output_tensor, p_data, group=self.process_group)
                else:
                    chunks = list(output_tensor.chunk(self.world_size))
                    dist.all_gather(chunks, p_data, group=self.process_group)
                p.data = output_tensor[: p._orig_size.numel()].view(p._orig_size)
                output_tensors.append((p.data, True))
        torch.cuda.current_stream().wait_stream(gather_stream)
        return output_tensors
