"""A bundled example for gradgate: a tensor-parallel forward written the way
TransformerEngine's LayerNormLinear / LayerNormMLP forwards are (grad mode captured in
the module and passed down), with the TransformerEngine #2902 bug in it twice, and the
correct uses of grad mode beside it that gradgate must leave alone.

Try:  gradgate check --show-source examples/   and   gradgate fix --diff examples/
"""

import torch


def get_ub(name):
    """Stand-in for a UserBuffers communicator lookup."""
    return name


def _column_parallel_forward(inp, weight, non_tensor_args):
    (
        ub_overlap_ag_fprop,
        ub_overlap_rs_fprop,
        ub_overlap_rs_dgrad,
        return_layernorm_output,
        is_grad_enabled,
    ) = non_tensor_args

    # correct: only the backward pass needs the input
    backward_needs_input = is_grad_enabled and weight.requires_grad
    # correct: the dgrad reduce-scatter overlap belongs to the backward pass
    ub_overlap_rs_dgrad = ub_overlap_rs_dgrad and is_grad_enabled

    # BUG (TE #2902): the requested all-gather overlap is dropped under no_grad
    ub_overlap_ag_fprop = (
        ub_overlap_ag_fprop and is_grad_enabled and not return_layernorm_output
    )
    # BUG: the same gate on the reduce-scatter overlap
    ub_overlap_rs_fprop = ub_overlap_rs_fprop and torch.is_grad_enabled()

    ub_obj = get_ub("fc1_fprop") if ub_overlap_ag_fprop or ub_overlap_rs_fprop else None
    out = inp @ weight.t()
    saved = (inp,) if backward_needs_input else ()
    return out, ub_obj, saved, ub_overlap_rs_dgrad


class ColumnParallelLinear(torch.nn.Module):
    def __init__(self, weight, ub_overlap_ag=True, ub_overlap_rs=False):
        super().__init__()
        self.weight = weight
        self.ub_overlap_ag = ub_overlap_ag
        self.ub_overlap_rs = ub_overlap_rs

    def forward(self, inp):
        is_grad_enabled = torch.is_grad_enabled()
        # correct, opposite polarity: a path with no backward, refused while grad is on
        fast_inference = self.ub_overlap_ag and not torch.is_grad_enabled()
        args = (self.ub_overlap_ag, self.ub_overlap_rs, False, False, is_grad_enabled)
        out, _, _, _ = _column_parallel_forward(inp, self.weight, args)
        return out if not fast_inference else out.contiguous()
