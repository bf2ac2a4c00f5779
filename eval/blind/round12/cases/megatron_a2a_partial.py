# adapted from NVIDIA/Megatron-LM megatron/core/transformer/moe/token_dispatcher.py
import functools

import torch
import torch.distributed as dist


class MoEAlltoAllSEQTokenDispatcher:
    def __init__(self, config, ep_group):
        self.config = config
        self.ep_group = ep_group
        self.input_splits = None
        self.output_splits = None
        self.probs = None

    def _make_a2a(self):
        return functools.partial(dist.all_to_all_single, group=self.ep_group, async_op=torch.is_grad_enabled())

    def dispatch_all_to_all(self, permutated_local_input_tokens, permuted_probs):
        a2a = self._make_a2a()
        global_input_tokens = permutated_local_input_tokens.new_empty(
            (sum(self.output_splits), permutated_local_input_tokens.shape[-1])
        )
        global_probs = permuted_probs.new_empty((sum(self.output_splits),))
        works = [
            a2a(global_input_tokens, permutated_local_input_tokens.contiguous(),
                self.output_splits, self.input_splits),
            a2a(global_probs, permuted_probs.contiguous(), self.output_splits, self.input_splits),
        ]
        for work in works:
            if work is not None:
                work.wait()
        return global_input_tokens, global_probs

    def combine_all_to_all(self, hidden_states):
        out = hidden_states.new_empty((sum(self.input_splits), hidden_states.shape[-1]))
        dist.all_to_all_single(out, hidden_states.contiguous(), self.input_splits, self.output_splits,
                               group=self.ep_group)
        return out
