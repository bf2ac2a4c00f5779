"""Synthetic modules, one per family of grad-mode gating bug, and correct uses of grad mode.

Each forward runs the same way on every rank of the default process group (gloo on CPU,
NCCL on GPUs). The witness tests run them in every mode and expect a divergence at the
lines named in ``EXPECTED`` (buggy families) or none (correct uses). ``gradgate fix`` is
run on a copy of this file by the tests: keep each decision on its own line.
"""

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from gradgate.witness import rank_device


class OverlapGatedOnGradMode(nn.Module):
    """TE #2902: an explicitly requested all-gather overlap dropped under no_grad."""

    def __init__(self, ub_overlap_ag: bool = True) -> None:
        super().__init__()
        self.ub_overlap_ag = ub_overlap_ag
        self.weight = nn.Parameter(torch.ones(4, 4))

    def forward(self, x):
        ub_overlap_ag = self.ub_overlap_ag
        ub_overlap_ag = ub_overlap_ag and torch.is_grad_enabled()
        if ub_overlap_ag:
            gathered = x.new_empty((x.shape[0] * dist.get_world_size(), x.shape[1]))
            dist.all_gather_into_tensor(gathered, x)
        else:
            gathered = x.repeat(dist.get_world_size(), 1)
        return gathered @ self.weight


class CollectiveSkippedUnderNoGrad(nn.Module):
    """A forward all-reduce that only runs when grad is enabled."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(4, 4))

    def forward(self, x):
        y = x @ self.weight
        if torch.is_grad_enabled():
            dist.all_reduce(y)
        return y


class GroupChosenByGradMode(nn.Module):
    """DeepSpeed #4784: the forward gathers over another process group under no_grad."""

    def __init__(self, primary, secondary) -> None:
        super().__init__()
        self.primary = primary
        self.secondary = secondary
        self.weight = nn.Parameter(torch.ones(4, 4))

    def forward(self, x):
        forward = torch.is_grad_enabled()
        group = self.secondary if not forward else self.primary
        size = dist.get_world_size(group)
        gathered = x.new_empty((x.shape[0] * size, x.shape[1]))
        dist.all_gather_into_tensor(gathered, x, group=group)
        return gathered @ self.weight


class DropoutOffUnderNoGrad(nn.Module):
    """DeepSpeed's transformer kernel: the training mode handed down is `training and grad`."""

    def __init__(self, p: float = 0.5) -> None:
        super().__init__()
        self.p = p
        self.weight = nn.Parameter(torch.ones(4, 4))

    def forward(self, x):
        y = x @ self.weight
        y = F.dropout(y, self.p, training=self.training and torch.is_grad_enabled())
        return y.relu()


class _SaveForBackward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, is_grad_enabled):
        if is_grad_enabled:
            ctx.save_for_backward(x, weight)
        return x @ weight

    @staticmethod
    def backward(ctx, grad_out):
        x, weight = ctx.saved_tensors
        return grad_out @ weight.t(), x.t() @ grad_out, None


class SavesForBackwardUnderGrad(nn.Module):
    """Correct: grad mode decides what is saved for backward, never the forward path."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(4, 4))

    def forward(self, x):
        is_grad_enabled = torch.is_grad_enabled()
        backward_needs_input = is_grad_enabled and self.weight.requires_grad
        saved = x.detach() if backward_needs_input else None
        del saved
        y = _SaveForBackward.apply(x, self.weight, is_grad_enabled)
        dist.all_reduce(y)
        return y


class NoBackwardKernelRefusedUnderGrad(nn.Module):
    """Correct, the opposite polarity: a kernel with no backward is refused while grad is on."""

    def __init__(self, fast_path: bool = True) -> None:
        super().__init__()
        self.fast_path = fast_path
        self.weight = nn.Parameter(torch.ones(4, 4))

    def forward(self, x):
        fast = self.fast_path
        fast = fast and not torch.is_grad_enabled()
        if fast:
            y = torch.mm(x, self.weight)
        else:
            y = torch.mm(x, self.weight)
        dist.all_reduce(y)
        return y


def _groups():
    """(the world, this rank alone): built on every rank, in the same order."""
    world = dist.group.WORLD
    singles = [dist.new_group([r]) for r in range(dist.get_world_size())]
    return world, singles[dist.get_rank()]


def _on_device(module):
    """``module`` on this rank's device, with a (2, 4) input there."""
    device = rank_device()
    x = torch.arange(8.0, device=device).reshape(2, 4) + dist.get_rank()
    return module.to(device), (x,)


def case_overlap_gated_on_grad_mode():
    return _on_device(OverlapGatedOnGradMode())


def case_collective_skipped_under_no_grad():
    return _on_device(CollectiveSkippedUnderNoGrad())


def case_group_chosen_by_grad_mode():
    return _on_device(GroupChosenByGradMode(*_groups()))


def case_dropout_off_under_no_grad():
    return _on_device(DropoutOffUnderNoGrad())


def case_saves_for_backward_under_grad():
    return _on_device(SavesForBackwardUnderGrad())


def case_no_backward_kernel_refused_under_grad():
    return _on_device(NoBackwardKernelRefusedUnderGrad())
