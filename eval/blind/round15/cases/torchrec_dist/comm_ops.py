# adapted from pytorch/torchrec torchrec/distributed/comm_ops.py
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, List, Optional, Tuple, TypeVar

import torch
import torch.distributed as dist
from torch import Tensor
from torch.autograd import Function
from torch.autograd.profiler import record_function

from torchrec.distributed.types import Awaitable, NoWait, QuantizedCommCodecs
from torchrec.pt2.checks import is_torchdynamo_compiling

W = TypeVar("W")

# TODO: T96382816, NE Parity Backward compatibility
GRADIENT_DIVISION: bool = True
USE_SYNC_COLLECTIVES: bool = False


def set_gradient_division(val: bool) -> None:
    global GRADIENT_DIVISION
    GRADIENT_DIVISION = val


def get_gradient_division() -> bool:
    global GRADIENT_DIVISION
    return GRADIENT_DIVISION


def set_use_sync_collectives(val: bool) -> None:
    global USE_SYNC_COLLECTIVES
    USE_SYNC_COLLECTIVES = val


def get_use_sync_collectives() -> bool:
    global USE_SYNC_COLLECTIVES
    return USE_SYNC_COLLECTIVES


@contextmanager
def torchrec_use_sync_collectives():
    original_use_sync_collectives: bool = get_use_sync_collectives()
    set_use_sync_collectives(True)
    yield
    set_use_sync_collectives(original_use_sync_collectives)


class Request(Awaitable[W]):
    """
    Defines a collective operation request for a process group on a tensor.
    """

    def __init__(self, pg: dist.ProcessGroup, device: torch.device) -> None:
        super().__init__()
        self.pg: dist.ProcessGroup = pg
        self.req: Optional[dist.Work] = None
        self.tensor: Optional[W] = None
        self.a2ai = None  # type: ignore
        self.qcomm_ctx = None  # type: ignore
        self.wait_function = None  # type: ignore
        self.dummy_tensor: torch.Tensor = torch.zeros_like(torch.empty(1, requires_grad=True, device=device))

    def _wait_impl(self) -> W:
        ret = self.wait_function.apply(self.pg, self, self.dummy_tensor)
        self.req = None
        self.tensor = None
        return ret


@dataclass
class All2AllPooledInfo(object):
    batch_size_per_rank: List[int]
    dim_sum_per_rank: List[int]
    dim_sum_per_rank_tensor: Optional[Tensor]
    cumsum_dim_sum_per_rank_tensor: Optional[Tensor]
    codecs: Optional[QuantizedCommCodecs] = None


def alltoall_pooled(
    a2a_pooled_embs_tensor: Tensor,
    batch_size_per_rank: List[int],
    dim_sum_per_rank: List[int],
    dim_sum_per_rank_tensor: Optional[Tensor] = None,
    cumsum_dim_sum_per_rank_tensor: Optional[Tensor] = None,
    group: Optional[dist.ProcessGroup] = None,
    codecs: Optional[QuantizedCommCodecs] = None,
) -> Awaitable[Tensor]:
    """
    Performs AlltoAll operation for a single pooled embedding tensor. Each process
    splits the input pooled embeddings tensor based on the world size, and then scatters
    the split list to all processes in the group.
    """
    if group is None:
        group = dist.distributed_c10d._get_default_group()

    if group.size() <= 1:
        return NoWait(a2a_pooled_embs_tensor)

    a2ai = All2AllPooledInfo(
        batch_size_per_rank=batch_size_per_rank,
        dim_sum_per_rank=dim_sum_per_rank,
        dim_sum_per_rank_tensor=dim_sum_per_rank_tensor,
        cumsum_dim_sum_per_rank_tensor=cumsum_dim_sum_per_rank_tensor,
        codecs=codecs,
    )

    if get_use_sync_collectives() or is_torchdynamo_compiling():
        return NoWait(all2all_pooled_sync(group, a2ai, a2a_pooled_embs_tensor))

    myreq = Request(group, device=a2a_pooled_embs_tensor.device)
    All2All_Pooled_Req.apply(group, myreq, a2ai, a2a_pooled_embs_tensor)
    return myreq


def all2all_pooled_sync(pg: dist.ProcessGroup, a2ai: All2AllPooledInfo, input_embeddings: Tensor) -> Tensor:
    my_rank = pg.rank()
    (B_global, D_local_sum) = input_embeddings.shape
    dim_sum_per_rank = a2ai.dim_sum_per_rank
    batch_size_per_rank = a2ai.batch_size_per_rank
    B_local = batch_size_per_rank[my_rank]
    assert B_global == sum(batch_size_per_rank)
    sharded_input_embeddings = input_embeddings.view(-1)
    output_split_sizes = [B_local * D_rank_sum for D_rank_sum in dim_sum_per_rank]
    input_split_sizes = [D_local_sum * B_rank for B_rank in batch_size_per_rank]
    with record_function("## alltoall_fwd_single ##"):
        sharded_output_embeddings = torch.empty(sum(output_split_sizes), dtype=input_embeddings.dtype, device=input_embeddings.device)
        dist.all_to_all_single(
            sharded_output_embeddings, sharded_input_embeddings, output_split_sizes, input_split_sizes, group=pg
        )
    outputs_by_rank = sharded_output_embeddings.split(output_split_sizes)
    return torch.cat([output.view(B_local, -1) for output in outputs_by_rank], dim=1)


class All2All_Pooled_Req(Function):
    @staticmethod
    def forward(ctx, pg: dist.ProcessGroup, myreq, a2ai: All2AllPooledInfo, input_embeddings: Tensor) -> Tensor:
        my_rank = dist.get_rank(pg)
        (B_global, D_local_sum) = input_embeddings.shape
        dim_sum_per_rank = a2ai.dim_sum_per_rank
        batch_size_per_rank = a2ai.batch_size_per_rank
        B_local = batch_size_per_rank[my_rank]
        sharded_input_embeddings = input_embeddings.view(-1)
        if a2ai.codecs is not None:
            qcomm_ctx = a2ai.codecs.forward.create_context()
            sharded_input_embeddings = a2ai.codecs.forward.encode(sharded_input_embeddings, qcomm_ctx)
        else:
            qcomm_ctx = None
        output_split_sizes = [B_local * D_rank_sum for D_rank_sum in dim_sum_per_rank]
        input_split_sizes = [D_local_sum * B_rank for B_rank in batch_size_per_rank]
        sharded_output_embeddings = torch.empty(
            sum(output_split_sizes), dtype=sharded_input_embeddings.dtype, device=sharded_input_embeddings.device
        )
        with record_function("## alltoall_fwd_single ##"):
            req = dist.all_to_all_single(
                output=sharded_output_embeddings,
                input=sharded_input_embeddings,
                output_split_sizes=output_split_sizes,
                input_split_sizes=input_split_sizes,
                group=pg,
                async_op=True,
            )
        myreq.req = req
        myreq.tensor = sharded_output_embeddings
        myreq.qcomm_ctx = qcomm_ctx
        myreq.a2ai = a2ai
        myreq.wait_function = All2All_Pooled_Wait
        ctx.myreq = myreq
        ctx.mixed_dim = a2ai.dim_sum_per_rank_tensor is not None
        return myreq.dummy_tensor

    @staticmethod
    def backward(ctx, *unused) -> Tuple[None, None, None, Tensor]:
        raise NotImplementedError("see upstream")


class All2All_Pooled_Wait(Function):
    @staticmethod
    def forward(ctx, pg: dist.ProcessGroup, myreq, *dummy_tensor: Tensor) -> Tensor:
        a2ai = myreq.a2ai
        ctx.a2ai = a2ai
        assert myreq.req is not None
        myreq.req.wait()
        sharded_output_embeddings = myreq.tensor
        myreq.req = None
        myreq.tensor = None
        ctx.pg = pg
        ctx.myreq = myreq
        dim_sum_per_rank = a2ai.dim_sum_per_rank
        batch_size_per_rank = a2ai.batch_size_per_rank
        B_local = batch_size_per_rank[dist.get_rank(pg)]
        if a2ai.codecs is not None:
            sharded_output_embeddings = a2ai.codecs.forward.decode(sharded_output_embeddings, myreq.qcomm_ctx)
        outputs_by_rank = sharded_output_embeddings.split([B_local * D for D in dim_sum_per_rank])
        return torch.cat([output.view(B_local, -1) for output in outputs_by_rank], dim=1)

    @staticmethod
    def backward(ctx, grad_output: Tensor) -> Tuple[None, None, Tensor]:
        raise NotImplementedError("see upstream")
