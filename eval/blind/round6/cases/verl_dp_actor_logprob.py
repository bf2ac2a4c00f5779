"""Micro-batch forward of the FSDP actor with Ulysses sequence parallel."""
import torch
from torch.utils.checkpoint import checkpoint

from verl.utils.torch_functional import logprobs_from_logits, entropy_from_logits
from verl.utils.ulysses import (
    gather_outputs_and_unpad,
    ulysses_pad_and_slice_inputs,
)
from flash_attn.bert_padding import index_first_axis, pad_input, rearrange, unpad_input


class DataParallelPPOActor:
    def __init__(self, config, actor_module, actor_optimizer=None):
        self.config = config
        self.actor_module = actor_module
        self.actor_optimizer = actor_optimizer
        self.ulysses_sequence_parallel_size = config.ulysses_sequence_parallel_size
        self.use_remove_padding = config.get("use_remove_padding", False)

    def _forward_micro_batch(self, micro_batch, temperature, calculate_entropy=False):
        input_ids = micro_batch["input_ids"]
        batch_size, seqlen = input_ids.shape
        attention_mask = micro_batch["attention_mask"]
        position_ids = micro_batch["position_ids"]
        response_length = micro_batch["responses"].size(-1)

        input_ids_rmpad, indices, *_ = unpad_input(input_ids.unsqueeze(-1), attention_mask)
        input_ids_rmpad = input_ids_rmpad.transpose(0, 1)
        position_ids_rmpad = index_first_axis(
            rearrange(position_ids.unsqueeze(-1), "b s ... -> (b s) ..."), indices
        ).transpose(0, 1)
        input_ids_rmpad_rolled = torch.roll(input_ids_rmpad, shifts=-1, dims=1)

        use_sp = self.ulysses_sequence_parallel_size > 1 and torch.is_grad_enabled()
        pad_size = 0
        if use_sp:
            input_ids_rmpad, position_ids_rmpad, pad_size = ulysses_pad_and_slice_inputs(
                input_ids_rmpad, position_ids_rmpad, sp_size=self.ulysses_sequence_parallel_size
            )
            input_ids_rmpad_rolled, _, _ = ulysses_pad_and_slice_inputs(
                input_ids_rmpad_rolled, None, self.ulysses_sequence_parallel_size
            )
        input_ids_rmpad_rolled = input_ids_rmpad_rolled.squeeze(0)

        output = self.actor_module(
            input_ids=input_ids_rmpad, attention_mask=None, position_ids=position_ids_rmpad, use_cache=False
        )
        logits_rmpad = output.logits.squeeze(0)
        logits_rmpad.div_(temperature)
        log_probs = logprobs_from_logits(logits=logits_rmpad, labels=input_ids_rmpad_rolled)

        entropy_rmpad = None
        if calculate_entropy:
            if torch.is_grad_enabled() and self.config.get("entropy_checkpointing", False):
                entropy_rmpad = checkpoint(entropy_from_logits, logits_rmpad, use_reentrant=False)
            else:
                entropy_rmpad = entropy_from_logits(logits_rmpad)

        if use_sp:
            log_probs = gather_outputs_and_unpad(log_probs, gather_dim=0, unpad_dim=0, padding_size=pad_size)
            if entropy_rmpad is not None:
                entropy_rmpad = gather_outputs_and_unpad(
                    entropy_rmpad, gather_dim=0, unpad_dim=0, padding_size=pad_size
                )

        full_log_probs = pad_input(log_probs.unsqueeze(-1), indices, batch_size, seqlen)
        log_probs = full_log_probs.squeeze(-1)[:, -response_length - 1 : -1]
        entropy = None
        if entropy_rmpad is not None:
            full_entropy = pad_input(entropy_rmpad.unsqueeze(-1), indices, batch_size, seqlen)
            entropy = full_entropy.squeeze(-1)[:, -response_length - 1 : -1]
        return entropy, log_probs
