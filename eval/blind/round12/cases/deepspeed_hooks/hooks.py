# adapted from microsoft/DeepSpeed deepspeed/runtime/zero/parameter_offload.py
import torch

from deepspeed.runtime.utils import apply_to_tensors_only

FWD_MODULE_STACK = list()


def register_zero3_hooks(module, coordinator, forward_hooks, backward_hooks):

    def _pre_forward_module_hook(module, *args):
        module._ds_grad_on = torch.is_grad_enabled()
        FWD_MODULE_STACK.append(module)
        coordinator.fetch_sub_module(module, forward=True)

    def _post_forward_module_hook(module, input, output):
        FWD_MODULE_STACK.pop()
        coordinator.release_sub_module(module, FWD_MODULE_STACK)

    def _post_backward_module_hook(module, inputs):
        if not torch.is_grad_enabled():
            return inputs
        module.ds_grads_remaining = 0

        class PostBackwardFunctionModule(torch.autograd.Function):
            @staticmethod
            def forward(ctx, output):
                ctx.module = module
                if output.requires_grad:
                    module.ds_grads_remaining += 1
                return output.detach()

            @staticmethod
            def backward(ctx, *args):
                ctx.module.ds_grads_remaining = ctx.module.ds_grads_remaining - 1
                if ctx.module.ds_grads_remaining == 0:
                    coordinator.release_sub_module(ctx.module, [])
                return args

        return apply_to_tensors_only(PostBackwardFunctionModule.apply, inputs)

    forward_hooks.append(module.register_forward_pre_hook(_pre_forward_module_hook))
    forward_hooks.append(module.register_forward_hook(_post_forward_module_hook))
    backward_hooks.append(module.register_forward_pre_hook(_post_backward_module_hook))
