import torch
import torch.distributed as dist


class Chunk:

    def __init__(self, chunk_size, process_group, dtype, device):
        self.process_group = process_group
        self.world_size = dist.get_world_size(process_group)
        self.shard = torch.empty(chunk_size // self.world_size, dtype=dtype, device=device)
        self.total = None
        self.is_gathered = False
        self.pending = None


class ChunkManager:

    def __init__(self):
        self.accessed_chunks = set()

    def access_chunk(self, chunk, async_access=False):
        if chunk.is_gathered or chunk.pending is not None:
            return chunk.pending
        chunk.total = chunk.shard.new_empty(chunk.shard.numel() * chunk.world_size)
        work = dist.all_gather_into_tensor(chunk.total, chunk.shard, group=chunk.process_group,
                                           async_op=async_access)
        chunk.pending = work
        if work is None:
            chunk.is_gathered = True
        self.accessed_chunks.add(chunk)
        return work

    def wait_chunk(self, chunk):
        if chunk.pending is not None:
            chunk.pending.wait()
            chunk.pending = None
        chunk.is_gathered = True
