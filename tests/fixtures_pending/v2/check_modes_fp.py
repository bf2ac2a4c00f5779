# v2: GG003 reported on a call that is not a kernel. No line here must be reported.
import torch
import torch.distributed as dist


# -- issue 11, 3: GG003 is "a kernel's training or dropout mode"; torch.set_grad_enabled
# is autograd's own switch (and "Not forward: ... guards"): nothing about numerics

def grad_context(x, train, pg):
    with torch.set_grad_enabled(torch.is_grad_enabled() and train):
        dist.all_reduce(x, group=pg)
    return x
