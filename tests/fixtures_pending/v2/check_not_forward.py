# v2: a forward pre-hook is missed when a backward hook elsewhere in the module has a
# closure of the same name. Lines ending in "# GG001" must be reported.
import torch
import torch.distributed as dist


def module_backward_hook(module, pg):
    def _hook(mod, grad_input, grad_output):
        if torch.is_grad_enabled():  # backward: quiet
            dist.all_reduce(grad_output[0], group=pg)

    module.register_full_backward_hook(_hook)


# -- issue 11, 3: "pre-forward hooks" are forward; scope comes from the node (4)

def module_pre_forward_hook(module, pg):
    def _hook(mod, args):
        if torch.is_grad_enabled():  # GG001
            dist.all_reduce(args[0], group=pg)

    module.register_forward_pre_hook(_hook)
