"""Micro-batch forward of the PPO actor (cf. verl/workers/actor/dp_actor.py::_forward_micro_batch)."""
import torch

from verl.utils.torch_functional import logprobs_from_logits
from verl.utils.ulysses import gather_outpus_and_unpad, ulysses_pad_and_slice_inputs

from .context import UlyssesContext, get_ulysses_context, set_ulysses_context


def entropy_from_logits(logits: torch.Tensor) -> torch.Tensor:
    pd = torch.nn.functional.softmax(logits, dim=-1)
    return torch.logsumexp(logits, dim=-1) - torch.sum(pd * logits, dim=-1)


class DataParallelPPOActor:

    def __init__(self, config, actor_module, ulysses_group=None):
        self.config = config
        self.actor_module = actor_module
        self.ulysses_group = ulysses_group
        self.ulysses_sequence_parallel_size = config.ulysses_sequence_parallel_size
        self.use_fused_kernels = config.get("use_fused_kernels", False)

    def _forward_micro_batch(self, micro_batch, temperature, calculate_entropy=False):
        input_ids = micro_batch["input_ids"]
        position_ids = micro_batch["position_ids"]
        set_ulysses_context(
            UlyssesContext(
                group=self.ulysses_group,
                sp_size=self.ulysses_sequence_parallel_size,
                grad_enabled=torch.is_grad_enabled(),
                overlap_qkv_all_to_all=self.config.get("ulysses_overlap_qkv", False),
            )
        )
        input_ids_rmpad, position_ids_rmpad, pad_size = ulysses_pad_and_slice_inputs(
            input_ids, position_ids, sp_size=self.ulysses_sequence_parallel_size
        )
        input_ids_rmpad_rolled = torch.roll(input_ids_rmpad, shifts=-1, dims=1)

        use_fused = self.use_fused_kernels and get_ulysses_context().grad_enabled
        output = self.actor_module(
            input_ids=input_ids_rmpad,
            position_ids=position_ids_rmpad,
            use_cache=False,
            return_dict=True,
            **({"temperature": temperature} if use_fused else {}),
        )

        entropy_rmpad = None
        if use_fused:
            log_probs = output.log_probs.squeeze(0)
            if calculate_entropy:
                entropy_rmpad = output.entropy.squeeze(0)
        else:
            logits_rmpad = output.logits.squeeze(0)
            logits_rmpad.div_(temperature)
            log_probs = logprobs_from_logits(logits=logits_rmpad, labels=input_ids_rmpad_rolled.squeeze(0))
            if calculate_entropy:
                if self.config.get("entropy_checkpointing", False) and torch.is_grad_enabled():
                    entropy_rmpad = torch.utils.checkpoint.checkpoint(entropy_from_logits, logits_rmpad)
                else:
                    entropy_rmpad = entropy_from_logits(logits_rmpad)

        if self.ulysses_sequence_parallel_size > 1:
            log_probs = gather_outpus_and_unpad(log_probs, gather_dim=0, unpad_dim=0, padding_size=pad_size)
            if calculate_entropy:
                entropy_rmpad = gather_outpus_and_unpad(entropy_rmpad, gather_dim=0, unpad_dim=0,
                                                        padding_size=pad_size)
        set_ulysses_context(None)
        return entropy_rmpad, log_probs
