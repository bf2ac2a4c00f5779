# adapted from vllm-project/vllm vllm/distributed/device_communicators/custom_all_reduce.py
from contextlib import contextmanager
from typing import cast

import torch
import torch.distributed as dist
from torch.distributed import ProcessGroup

import vllm.envs as envs
from vllm import _custom_ops as ops
from vllm.logger import init_logger
from vllm.platforms import current_platform

logger = init_logger(__name__)


def is_weak_contiguous(inp: torch.Tensor):
    return inp.is_contiguous() or (
        inp.storage().nbytes() - inp.storage_offset() * inp.element_size()
        == inp.numel() * inp.element_size()
    )


class CustomAllreduce:
    _SUPPORTED_WORLD_SIZES = [2, 4, 6, 8]

    def __init__(self, group: ProcessGroup, device, max_size=8192 * 1024) -> None:
        self._IS_CAPTURING = False
        self.disabled = True
        self.group = group
        self.rank = dist.get_rank(group=self.group)
        self.world_size = dist.get_world_size(group=self.group)
        self.device = device
        self.fully_connected = current_platform.is_fully_connected(list(range(self.world_size)))
        self.one_shot_max_size = envs.VLLM_CUSTOM_AR_ONE_SHOT_MAX_SIZE
        self._pending_max_size = max_size
        self._complete_init()

    def _complete_init(self) -> None:
        max_size = self._pending_max_size
        self.disabled = False
        self.meta_ptrs = self.create_shared_buffer(ops.meta_size() + max_size, group=self.group, uncached=True)
        self.buffer_ptrs = self.create_shared_buffer(max_size, group=self.group)
        self.rank_data = torch.empty(8 * 1024 * 1024, dtype=torch.uint8, device=self.device)
        self.max_size = max_size
        self._ptr = ops.init_custom_ar(self.meta_ptrs, self.rank_data, self.rank, self.fully_connected)
        ops.register_buffer(self._ptr, self.buffer_ptrs)

    @contextmanager
    def capture(self):
        try:
            self._IS_CAPTURING = True
            yield
        finally:
            self._IS_CAPTURING = False
            if not self.disabled:
                self.register_graph_buffers()

    def register_graph_buffers(self):
        handle, offset = ops.get_graph_buffer_ipc_meta(self._ptr)
        logger.info("Registering %d cuda graph addresses", len(offset))
        all_data = [[None, None] for _ in range(dist.get_world_size(group=self.group))]
        all_data[self.rank] = [handle, offset]
        ranks = sorted(dist.get_process_group_ranks(group=self.group))
        for i, rank in enumerate(ranks):
            dist.broadcast_object_list(all_data[i], src=rank, group=self.group, device="cpu")
        handles = cast(list[list[int]], [d[0] for d in all_data])
        offsets = cast(list[list[int]], [d[1] for d in all_data])
        ops.register_graph_buffers(self._ptr, handles, offsets)

    def should_custom_ar(self, inp: torch.Tensor):
        if self.disabled:
            return False
        inp_size = inp.numel() * inp.element_size()
        # custom allreduce requires input byte size to be multiples of 16
        if inp_size % 16 != 0:
            return False
        if not is_weak_contiguous(inp):
            return False
        # for 4 or more non NVLink-capable GPUs, custom allreduce provides
        # little performance improvement over NCCL.
        if self.world_size == 2 or self.fully_connected:
            return inp_size < self.max_size
        return False

    def all_reduce(self, inp: torch.Tensor, *, out: torch.Tensor = None, registered: bool = False,
                   one_shot: bool = True):
        """Performs an out-of-place all reduce."""
        if out is None:
            out = torch.empty_like(inp)
        if registered:
            ops.all_reduce(self._ptr, inp, out, 0, 0)
        elif one_shot:
            ops.all_reduce(self._ptr, inp, out, self.buffer_ptrs[self.rank], self.max_size)
        else:
            ops.all_reduce_two_shot(self._ptr, inp, out, self.buffer_ptrs[self.rank], self.max_size)
        return out

    def custom_all_reduce(self, input: torch.Tensor):
        """The main allreduce API that provides support for cuda graph."""
        if self.disabled or not self.should_custom_ar(input):
            return None
        inp_bytes = input.numel() * input.element_size()
        one_shot = (
            inp_bytes <= self.one_shot_max_size
            and not torch.is_inference_mode_enabled()
        ) or self.world_size == 2
        if torch.is_inference_mode_enabled() and not self._IS_CAPTURING:
            # inference tensors never alias saved activations, so reduce in place
            return self.all_reduce(input, out=input, registered=False, one_shot=one_shot)
        if self._IS_CAPTURING:
            if torch.cuda.is_current_stream_capturing():
                return self.all_reduce(input, registered=True)
            else:
                # If warm up, mimic the allocation pattern since custom
                # allreduce is out-of-place.
                return torch.empty_like(input)
        else:
            return self.all_reduce(input, registered=False, one_shot=one_shot)

    def close(self):
        if not self.disabled and self._ptr:
            if ops is not None:
                ops.dispose(self._ptr)
            self._ptr = 0
            self.free_shared_buffer(self.meta_ptrs, rank=self.rank)
            self.free_shared_buffer(self.buffer_ptrs, rank=self.rank)

    def __del__(self):
        self.close()

    @staticmethod
    def create_shared_buffer(size_in_bytes: int, group=None, uncached=False) -> list[int]:
        pointer, handle = ops.allocate_shared_buffer_and_handle(size_in_bytes)
        world_size = dist.get_world_size(group=group)
        rank = dist.get_rank(group=group)
        handles = [None] * world_size
        dist.all_gather_object(handles, handle, group=group)
        pointers: list[int] = []
        for i, h in enumerate(handles):
            if i == rank:
                pointers.append(pointer)
            else:
                pointers.append(ops.open_mem_handle(h))
        return pointers

    @staticmethod
    def free_shared_buffer(pointers: list[int], group=None, rank=None) -> None:
        if rank is None:
            rank = dist.get_rank(group=group)
        if ops is not None:
            ops.free_shared_buffer(pointers[rank])
