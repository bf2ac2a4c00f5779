import torch
import torch.distributed as dist
import torch.nn as nn


class ParallelExperts(nn.Module):

    def __init__(self, mlp, ep_pg=None, a2a_chunks=4):
        super().__init__()
        self.mlp = mlp
        self.ep_pg = ep_pg
        self.a2a_chunks = a2a_chunks

    def _a2a(self, x, out_splits, in_splits):
        out = x.new_empty((sum(out_splits), x.shape[-1]))
        dist.all_to_all_single(out, x, output_split_sizes=out_splits, input_split_sizes=in_splits, group=self.ep_pg)
        return out

    def forward(self, x, send_counts, recv_counts, state):
        if self.ep_pg is None:
            return self.mlp(x)
        num_chunks = self.a2a_chunks if state.is_train else 1
        outputs = []
        for piece, s, r in zip(x.tensor_split(num_chunks), _split(send_counts, num_chunks),
                               _split(recv_counts, num_chunks)):
            routed = self._a2a(piece, r, s)
            outputs.append(self._a2a(self.mlp(routed), s, r))
        return torch.cat(outputs)


def _split(counts, n):
    return [[c // n + (1 if i < c % n else 0) for c in counts] for i in range(n)]
