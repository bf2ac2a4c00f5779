import torch

from .communicator import ISPCommunicator


def register_isp_hooks(blocks, communicator: ISPCommunicator):
    def _pre_forward_hook_for_block(block, *args):
        communicator.is_forward = True
        communicator.grad_mode = torch.is_grad_enabled()
        communicator.before_block_forward(block)

    def _post_forward_hook_for_block(block, *args):
        communicator.after_block_forward(block)

    def _pre_backward_hook_for_block(block, *args):
        communicator.is_forward = False
        communicator.before_block_backward(block)

    for block in blocks:
        block.register_forward_pre_hook(_pre_forward_hook_for_block)
        block.register_forward_hook(_post_forward_hook_for_block)
        block.register_full_backward_pre_hook(_pre_backward_hook_for_block)
