# Modelled on verl verl/workers/actor/dp_actor.py (DataParallelPPOActor._forward_micro_batch)
import torch
from flash_attn.bert_padding import index_first_axis, pad_input, rearrange, unpad_input

import verl.utils.torch_functional as verl_F
from verl.utils.torch_functional import logprobs_from_logits
from verl.utils.ulysses import gather_outputs_and_unpad, ulysses_pad_and_slice_inputs


class DataParallelPPOActor:
    def __init__(self, config, actor_module, actor_optimizer=None):
        self.config = config
        self.actor_module = actor_module
        self.actor_optimizer = actor_optimizer
        self.use_remove_padding = self.config.get("use_remove_padding", False)
        self.use_fused_kernels = self.config.get("use_fused_kernels", False)
        self.ulysses_sequence_parallel_size = self.config.ulysses_sequence_parallel_size
        self.use_ulysses_sp = self.ulysses_sequence_parallel_size > 1
        self.compute_entropy_from_logits = torch.compile(verl_F.entropy_from_logits, dynamic=True)

    def _forward_micro_batch(self, micro_batch, temperature, calculate_entropy=False):
        response_length = micro_batch["responses"].size(-1)
        with torch.autocast(device_type="cuda", dtype=torch.bfloat16):
            input_ids = micro_batch["input_ids"]
            batch_size, seqlen = input_ids.shape
            attention_mask = micro_batch["attention_mask"]
            position_ids = micro_batch["position_ids"]
            use_fused_kernels = self.use_fused_kernels and torch.is_grad_enabled()

            input_ids_rmpad, indices, *_ = unpad_input(input_ids.unsqueeze(-1), attention_mask)
            input_ids_rmpad = input_ids_rmpad.transpose(0, 1)
            position_ids_rmpad = index_first_axis(
                rearrange(position_ids.unsqueeze(-1), "b s ... -> (b s) ..."), indices
            ).transpose(0, 1)
            input_ids_rmpad_rolled = torch.roll(input_ids_rmpad, shifts=-1, dims=1)
            pad_size = 0
            if self.use_ulysses_sp:
                input_ids_rmpad, position_ids_rmpad, pad_size = ulysses_pad_and_slice_inputs(
                    input_ids_rmpad, position_ids_rmpad, sp_size=self.ulysses_sequence_parallel_size
                )
                input_ids_rmpad_rolled, _, _ = ulysses_pad_and_slice_inputs(
                    input_ids_rmpad_rolled, None, self.ulysses_sequence_parallel_size
                )
            input_ids_rmpad_rolled = input_ids_rmpad_rolled.squeeze(0)

            extra_args = {}
            if use_fused_kernels:
                extra_args["temperature"] = temperature
                extra_args["return_dict"] = True

            output = self.actor_module(
                input_ids=input_ids_rmpad, attention_mask=None, position_ids=position_ids_rmpad,
                use_cache=False, **extra_args,
            )

            if use_fused_kernels:
                log_probs = output.log_probs.squeeze(0)
                entropy_rmpad = output.entropy.squeeze(0) if calculate_entropy else None
            else:
                logits_rmpad = output.logits.squeeze(0)
                logits_rmpad.div_(temperature)
                inplace_backward = torch.is_grad_enabled() and not calculate_entropy
                log_probs = logprobs_from_logits(
                    logits=logits_rmpad, labels=input_ids_rmpad_rolled, inplace_backward=inplace_backward
                )
                entropy_rmpad = None
                if calculate_entropy:
                    if self.config.entropy_checkpointing and torch.is_grad_enabled():
                        entropy_rmpad = torch.utils.checkpoint.checkpoint(
                            self.compute_entropy_from_logits, logits_rmpad
                        )
                    else:
                        entropy_rmpad = self.compute_entropy_from_logits(logits_rmpad)

            if self.use_ulysses_sp:
                log_probs = gather_outputs_and_unpad(log_probs, gather_dim=0, unpad_dim=0, padding_size=pad_size)
                if calculate_entropy:
                    entropy_rmpad = gather_outputs_and_unpad(
                        entropy_rmpad, gather_dim=0, unpad_dim=0, padding_size=pad_size
                    )

            full_log_probs = pad_input(log_probs.unsqueeze(-1), indices=indices, batch=batch_size, seqlen=seqlen)
            log_probs = full_log_probs.squeeze(-1)[:, -response_length - 1: -1]
            entropy = None
            if calculate_entropy:
                full_entropy = pad_input(entropy_rmpad.unsqueeze(-1), indices=indices, batch=batch_size,
                                         seqlen=seqlen)
                entropy = full_entropy.squeeze(-1)[:, -response_length - 1: -1]
            return entropy, log_probs

    def compute_log_prob(self, data, calculate_entropy=False):
        self.actor_module.eval()
        micro_batches = data.split(self.config.log_prob_micro_batch_size_per_gpu)
        log_probs_lst = []
        for micro_batch in micro_batches:
            with torch.no_grad():
                _, log_probs = self._forward_micro_batch(micro_batch, temperature=data.meta_info["temperature"],
                                                         calculate_entropy=calculate_entropy)
            log_probs_lst.append(log_probs)
        return torch.concat(log_probs_lst, dim=0)
