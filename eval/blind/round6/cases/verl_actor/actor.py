import torch
from flash_attn.bert_padding import index_first_axis, pad_input, rearrange, unpad_input

from .meta import build_meta
from .rmpad_forward import forward_rmpad


class DataParallelPPOActor:
    def __init__(self, config, actor_module, actor_optimizer=None):
        self.config = config
        self.actor_module = actor_module
        self.actor_optimizer = actor_optimizer
        self.sp_size = config.ulysses_sequence_parallel_size

    def _forward_micro_batch(self, micro_batch, temperature, calculate_entropy=False):
        meta = build_meta(micro_batch, temperature, calculate_entropy)
        input_ids = micro_batch["input_ids"]
        batch_size, seqlen = input_ids.shape
        ids_rmpad, indices, *_ = unpad_input(input_ids.unsqueeze(-1), micro_batch["attention_mask"])
        pos_rmpad = index_first_axis(
            rearrange(micro_batch["position_ids"].unsqueeze(-1), "b s ... -> (b s) ..."), indices
        ).transpose(0, 1)
        log_probs, entropy = forward_rmpad(
            self.actor_module, self.config, meta, ids_rmpad.transpose(0, 1), pos_rmpad, self.sp_size
        )
        n = meta.response_length
        log_probs = pad_input(log_probs.unsqueeze(-1), indices, batch_size, seqlen).squeeze(-1)[:, -n - 1 : -1]
        if entropy is not None:
            entropy = pad_input(entropy.unsqueeze(-1), indices, batch_size, seqlen).squeeze(-1)[:, -n - 1 : -1]
        return entropy, log_probs

    def compute_log_prob(self, micro_batches, temperature):
        self.actor_module.eval()
        with torch.no_grad():
            outs = [self._forward_micro_batch(mb, temperature)[1] for mb in micro_batches]
        return torch.cat(outs, dim=0)
