# Adapted from OpenRLHF/OpenRLHF openrlhf/models/ring_attn_utils.py and ring_flash_attn usage
import torch
import torch.distributed as dist


class RingAttention(torch.nn.Module):
    def __init__(self, group, ring_in_eval=False):
        super().__init__()
        self.group = group
        self.ring_in_eval = ring_in_eval

    def _ring(self, q, k, v):
        world = dist.get_world_size(self.group)
        rank = dist.get_rank(self.group)
        out = torch.zeros_like(q)
        for step in range(world):
            out = out + torch.softmax(q @ k.transpose(-1, -2), -1) @ v
            nk, nv = torch.empty_like(k), torch.empty_like(v)
            ops = [dist.P2POp(dist.isend, k, (rank + 1) % world, self.group),
                   dist.P2POp(dist.irecv, nk, (rank - 1) % world, self.group)]
            for r in dist.batch_isend_irecv(ops):
                r.wait()
            k, v = nk, v
        return out

    def forward(self, q, k, v):
        gather_kv = self.ring_in_eval is False and not torch.is_grad_enabled()
        if gather_kv:
            world = dist.get_world_size(self.group)
            kk = torch.empty((k.shape[0] * world,) + k.shape[1:], dtype=k.dtype, device=k.device)
            vv = torch.empty_like(kk)
            dist.all_gather_into_tensor(kk, k.contiguous(), group=self.group)
            dist.all_gather_into_tensor(vv, v.contiguous(), group=self.group)
            return torch.softmax(q @ kk.transpose(-1, -2), -1) @ vv
        return self._ring(q, k, v)


def register_ring_grad_hooks(model):
    hooked = [p for p in model.parameters() if p.requires_grad and torch.is_grad_enabled()]
    for p in hooked:
        p.register_hook(lambda g: g)
    return len(hooked)
