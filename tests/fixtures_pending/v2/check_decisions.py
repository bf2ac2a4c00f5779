# v2 decisions the engine misses today. Lines ending in "# GG001" must be reported.
import torch
import torch.distributed as dist


# -- issue 11, 3: "flags set in any target form (..., or returned by a function or
# property used as a flag)"

class Overlapper:
    def __init__(self, overlap_comm):
        self.overlap_comm = overlap_comm

    def _should_overlap(self):
        return self.overlap_comm and torch.is_grad_enabled()  # GG001

    def reduce(self, x):
        return dist.all_reduce(x, async_op=self._should_overlap())


def _use_async(use_async):
    return use_async and torch.is_grad_enabled()  # GG001


def returned_by_function(x, use_async):
    return dist.all_reduce(x, async_op=_use_async(use_async))


# -- issue 11, 3: "flags set in any target form (name, attribute, subscript, tuple,
# dict value, ...)": a dict of keyword values splatted into the collective

def dict_value(x, use_async):
    opts = {"async_op": use_async and torch.is_grad_enabled()}  # GG001
    return dist.all_reduce(x, **opts)
