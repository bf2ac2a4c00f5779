import os

import torch
import torch.distributed as dist

from transformer_engine.pytorch.attention.dot_product_attention.backends import flash_attn_fwd
from transformer_engine.pytorch.attention.dot_product_attention.utils import get_seq_chunk_ids_for_reordering


def flash_attn_p2p_communicate(rank, send_tensor, send_dst, recv_tensor, recv_src, cp_group, batch_p2p_comm):
    send_recv_ops = []
    if batch_p2p_comm:
        if rank % 2 == 0:
            send_op = dist.P2POp(dist.isend, send_tensor, send_dst, cp_group)
            recv_op = dist.P2POp(dist.irecv, recv_tensor, recv_src, cp_group)
            send_recv_ops.append(send_op)
            send_recv_ops.append(recv_op)
        else:
            recv_op = dist.P2POp(dist.irecv, recv_tensor, recv_src, cp_group)
            send_op = dist.P2POp(dist.isend, send_tensor, send_dst, cp_group)
            send_recv_ops.append(recv_op)
            send_recv_ops.append(send_op)
        send_recv_reqs = dist.batch_isend_irecv(send_recv_ops)
    else:
        if rank % 2 == 0:
            send_recv_reqs = [dist.isend(send_tensor, send_dst, cp_group), dist.irecv(recv_tensor, recv_src, cp_group)]
        else:
            send_recv_reqs = [dist.irecv(recv_tensor, recv_src, cp_group), dist.isend(send_tensor, send_dst, cp_group)]
    return send_recv_reqs


class AttnFuncWithCPAndKVP2P(torch.autograd.Function):
    @staticmethod
    def forward(ctx, is_training, q, k, v, cu_seqlens_q, cu_seqlens_kv, dropout_p,
                softmax_scale, cp_group, cp_global_ranks, cp_stream):
        cp_size = dist.get_world_size(group=cp_group)
        rank = dist.get_rank(group=cp_group)
        send_dst = cp_global_ranks[(rank + 1) % cp_size]
        recv_src = cp_global_ranks[(rank - 1) % cp_size]
        batch_p2p_comm = int(os.getenv("NVTE_BATCH_MHA_P2P_COMM", "0")) or (cp_size == 2) or not is_training

        p2p_comm_buffers = [None for _ in range(cp_size)]
        p2p_comm_buffers[0] = torch.cat((k.unsqueeze(0), v.unsqueeze(0)), dim=0)
        send_recv_reqs = [[], []]
        out_per_step = [None for _ in range(cp_size)]
        softmax_lse_per_step = [None for _ in range(cp_size)]
        rng_states = [None for _ in range(cp_size)]

        for i in range(cp_size + 1):
            if i < cp_size:
                with torch.cuda.stream(cp_stream if i % 2 else torch.cuda.current_stream()):
                    for req in send_recv_reqs[(i + 1) % 2]:
                        req.wait()
                    if i < (cp_size - 1):
                        p2p_comm_buffers[i + 1] = torch.empty_like(p2p_comm_buffers[i])
                        send_recv_reqs[i % 2] = flash_attn_p2p_communicate(
                            rank, p2p_comm_buffers[i], send_dst, p2p_comm_buffers[i + 1],
                            recv_src, cp_group, batch_p2p_comm,
                        )
                    kv_inputs = p2p_comm_buffers[i]
                    out_per_step[i], softmax_lse_per_step[i], rng_states[i] = flash_attn_fwd(
                        q, kv_inputs[0], kv_inputs[1], cu_seqlens_q, cu_seqlens_kv,
                        dropout_p, softmax_scale, causal=(i <= rank),
                    )
        out = out_per_step[0]
        softmax_lse = softmax_lse_per_step[0]
        for i in range(1, cp_size):
            new_lse = torch.logaddexp(softmax_lse, softmax_lse_per_step[i])
            out = out * torch.exp(softmax_lse - new_lse).unsqueeze(-1) + \
                out_per_step[i] * torch.exp(softmax_lse_per_step[i] - new_lse).unsqueeze(-1)
            softmax_lse = new_lse

        if is_training:
            ctx.save_for_backward(q, k, v, out, softmax_lse, cu_seqlens_q, cu_seqlens_kv)
            ctx.rng_states = rng_states
            ctx.cp_group = cp_group
            ctx.cp_global_ranks = cp_global_ranks
            ctx.dropout_p = dropout_p
            ctx.softmax_scale = softmax_scale
        return out


def attn_forward_func_with_cp(q, k, v, cu_seqlens_q, cu_seqlens_kv, dropout_p, cp_group,
                              cp_global_ranks, cp_stream, softmax_scale=None):
    is_training = torch.is_grad_enabled()
    return AttnFuncWithCPAndKVP2P.apply(
        is_training, q, k, v, cu_seqlens_q, cu_seqlens_kv, dropout_p, softmax_scale,
        cp_group, cp_global_ranks, cp_stream,
    )
