import torch
import torch.distributed as dist

from torchrec.distributed.types import Awaitable, NoWait


class _ReduceScatterAwaitable(Awaitable[torch.Tensor]):
    def __init__(self, work, out: torch.Tensor) -> None:
        super().__init__()
        self._work = work
        self._out = out

    def _wait_impl(self) -> torch.Tensor:
        self._work.wait()
        return self._out


def reduce_scatter_pooled(embs: torch.Tensor, pg: dist.ProcessGroup, ctx) -> Awaitable[torch.Tensor]:
    world = pg.size()
    out = embs.new_empty((embs.size(0) // world, embs.size(1)))
    if ctx.build_graph:
        work = dist.reduce_scatter_tensor(out, embs, group=pg, async_op=True)
        return _ReduceScatterAwaitable(work, out)
    dist.reduce_scatter_tensor(out, embs, group=pg)
    return NoWait(out)
