# v2 sources the engine misses today. Lines ending in "# GG001" must be reported.
import torch
import torch.distributed as dist


# -- issue 11, 1: "`getattr(torch, \"is_grad_enabled\")` ... under any import alias":
# the function object taken by getattr, called later

def stored_getattr(x, use_async):
    probe = getattr(torch, "is_grad_enabled")
    use_async = use_async and probe()  # GG001
    return dist.all_reduce(x, async_op=use_async)


# -- issue 11, 1: "functions or properties of the same module that return one":
# a lambda of this module returning grad mode

def lambda_source(x, use_async):
    recording = lambda: torch.is_grad_enabled()  # noqa: E731
    use_async = use_async and recording()  # GG001
    return dist.all_reduce(x, async_op=use_async)
