# adapted from NVIDIA/Megatron-LM megatron/core/transformer/moe/token_dispatcher.py
import torch
import torch.distributed as dist

from .state import MoEForwardState


class AlltoAllDispatcher:
    def __init__(self, config, ep_group):
        self.config = config
        self.ep_group = ep_group
        self.input_splits = None
        self.output_splits = None

    def _a2a(self, tensor, output_splits, input_splits, async_op=False):
        out = tensor.new_empty((sum(output_splits), *tensor.shape[1:]))
        work = dist.all_to_all_single(out, tensor.contiguous(), output_splits, input_splits,
                                      group=self.ep_group, async_op=async_op)
        return out, work

    def dispatch_all_to_all(self, permutated_local_input_tokens, permuted_probs):
        if MoEForwardState.grad_enabled and self.config.moe_overlap_dispatch:
            tokens, tok_work = self._a2a(permutated_local_input_tokens, self.output_splits,
                                         self.input_splits, async_op=True)
            probs, prob_work = self._a2a(permuted_probs, self.output_splits, self.input_splits, async_op=True)
            tok_work.wait()
            prob_work.wait()
        else:
            tokens, _ = self._a2a(permutated_local_input_tokens, self.output_splits, self.input_splits)
            probs, _ = self._a2a(permuted_probs, self.output_splits, self.input_splits)
        return tokens, probs
