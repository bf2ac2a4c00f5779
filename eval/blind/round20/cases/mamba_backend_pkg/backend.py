# adapted from state-spaces/mamba mamba_ssm/ops/selective_scan_interface.py
import torch
import torch.nn.functional as F
from einops import rearrange

try:
    import selective_scan_cuda
except ImportError:
    selective_scan_cuda = None


def selective_scan_ref(u, delta, A, B, C, D=None, z=None, delta_bias=None, delta_softplus=False):
    dtype_in = u.dtype
    u = u.float()
    delta = delta.float()
    if delta_bias is not None:
        delta = delta + delta_bias[..., None].float()
    if delta_softplus:
        delta = F.softplus(delta)
    batch, dim, dstate = u.shape[0], A.shape[0], A.shape[1]
    B, C = B.float(), C.float()
    x = A.new_zeros((batch, dim, dstate))
    ys = []
    deltaA = torch.exp(torch.einsum('bdl,dn->bdln', delta, A))
    deltaB_u = torch.einsum('bdl,bnl,bdl->bdln', delta, B, u)
    for i in range(u.shape[2]):
        x = deltaA[:, :, i] * x + deltaB_u[:, :, i]
        ys.append(torch.einsum('bdn,bn->bd', x, C[:, :, i]))
    y = torch.stack(ys, dim=2)
    out = y if D is None else y + u * rearrange(D, "d -> d 1")
    if z is not None:
        out = out * F.silu(z)
    return out.to(dtype=dtype_in)


class ScanBackend:
    def __init__(self, fused: bool):
        self.fused = fused

    def scan(self, u, delta, A, B, C, D=None, z=None, delta_bias=None, delta_softplus=False):
        if self.fused and selective_scan_cuda is not None:
            if B.dim() == 3:
                B = rearrange(B, "b dstate l -> b 1 dstate l")
            if C.dim() == 3:
                C = rearrange(C, "b dstate l -> b 1 dstate l")
            out, x, *rest = selective_scan_cuda.fwd(u.contiguous(), delta.contiguous(), A, B, C, D, z,
                                                    delta_bias, delta_softplus, None)
            return rest[0] if z is not None else out
        return selective_scan_ref(u, delta, A, B, C, D, z, delta_bias, delta_softplus)
