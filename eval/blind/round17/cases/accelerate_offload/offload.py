# adapted from huggingface/accelerate src/accelerate/hooks.py
import torch

from accelerate.utils import named_module_tensors, set_module_tensor_to_device

from .state import get_forward_state


def prefetch_next_module(hook, next_module):
    """Start copying the next offloaded module's weights on a side stream."""
    state = get_forward_state()
    if not state.grad_enabled or next_module is None:
        return
    if state.prefetch_stream is None:
        state.prefetch_stream = torch.cuda.Stream()
    with torch.cuda.stream(state.prefetch_stream):
        for name, _ in named_module_tensors(next_module, include_buffers=hook.offload_buffers):
            set_module_tensor_to_device(next_module, name, hook.execution_device, value=hook.weights_map[name])


def load_module_weights(hook, module):
    state = get_forward_state()
    # eval copies can run asynchronously; nothing in autograd holds the host tensors
    non_blocking = not state.grad_enabled
    for name, _ in named_module_tensors(
        module,
        include_buffers=hook.offload_buffers,
        recurse=hook.place_submodules,
        remove_non_persistent=True,
    ):
        value = hook.weights_map[name].to(hook.execution_device, non_blocking=non_blocking)
        set_module_tensor_to_device(module, name, hook.execution_device, value=value)
