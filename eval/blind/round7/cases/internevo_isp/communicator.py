import torch
import torch.distributed as dist


class ISPCommunicator:
    def __init__(self, block_modules, process_group, overlap: bool = True, reduce_grads_async: bool = True):
        self.block_modules = block_modules
        self.process_group = process_group
        self.overlap = overlap
        self.reduce_grads_async = reduce_grads_async
        self.is_forward = True
        self.grad_mode = True
        self._weight_global_output = {}
        self._handles = {}

    def _all_gather_block_weight(self, block, async_op: bool):
        for module in self.block_modules[block]:
            full = torch.empty(module.weight.numel() * dist.get_world_size(self.process_group),
                               dtype=module.weight.dtype, device=module.weight.device)
            handle = dist.all_gather_into_tensor(full, module.weight, group=self.process_group, async_op=async_op)
            self._weight_global_output[module] = full
            self._handles[module] = handle

    def _next_block(self, block):
        keys = list(self.block_modules)
        idx = keys.index(block)
        return keys[idx + 1] if idx + 1 < len(keys) else None

    def before_block_forward(self, block):
        if block not in self._weight_global_output:
            self._all_gather_block_weight(block, async_op=False)
        nxt = self._next_block(block)
        if self.overlap and self.grad_mode and nxt is not None:
            self._all_gather_block_weight(nxt, async_op=True)

    def after_block_forward(self, block):
        for module in self.block_modules[block]:
            if not self.grad_mode:
                self._weight_global_output.pop(module, None)
                self._handles.pop(module, None)
            elif self.reduce_grads_async and self.grad_mode:
                module.weight.register_hook(lambda g, m=module: self._reduce_scatter_grad(m, g))

    def before_block_backward(self, block):
        if block not in self._weight_global_output:
            self._all_gather_block_weight(block, async_op=False)

    def _reduce_scatter_grad(self, module, grad):
        out = torch.empty_like(module.weight)
        dist.reduce_scatter_tensor(out, grad, group=self.process_group, async_op=self.reduce_grads_async)
        return grad
