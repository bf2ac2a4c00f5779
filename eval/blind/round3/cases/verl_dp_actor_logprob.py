# Modelled on verl/workers/actor/dp_actor.py and verl/utils/torch_functional.py (verl v0.3-0.4).
import torch
import torch.nn.functional as F

from verl.utils.torch_functional import entropy_from_logits, logprobs_from_logits_v2

try:
    from flash_attn.ops.triton.cross_entropy import cross_entropy_loss

    FLASH_ATTN_CROSS_ENTROPY_LOSS_AVAILABLE = True
except ImportError:
    FLASH_ATTN_CROSS_ENTROPY_LOSS_AVAILABLE = False


def logprobs_from_logits_flash_attn(logits, labels, inplace_backward=True):
    output = cross_entropy_loss(logits, labels, inplace_backward=inplace_backward)
    assert isinstance(output, tuple)
    return -output[0]


def logprobs_from_logits(logits, labels, inplace_backward=True):
    if FLASH_ATTN_CROSS_ENTROPY_LOSS_AVAILABLE and torch.is_grad_enabled():
        batch_dim = logits.shape[:-1]
        last_dim = logits.shape[-1]
        logits = logits.reshape(-1, last_dim)
        labels = labels.reshape(-1)
        output = logprobs_from_logits_flash_attn(logits, labels, inplace_backward=inplace_backward)
        return output.view(*batch_dim)
    return logprobs_from_logits_v2(logits, labels)


class DataParallelPPOActor:
    def __init__(self, config, actor_module, actor_optimizer=None):
        self.config = config
        self.actor_module = actor_module
        self.actor_optimizer = actor_optimizer
        self.use_remove_padding = config.get("use_remove_padding", False)
        self.param_dtype = torch.bfloat16
        self.compute_entropy_from_logits = torch.compile(entropy_from_logits, dynamic=True)

    def _forward_micro_batch(self, micro_batch, temperature, calculate_entropy=False):
        response_length = micro_batch["responses"].size(-1)
        input_ids = micro_batch["input_ids"]
        attention_mask = micro_batch["attention_mask"]
        position_ids = micro_batch["position_ids"]

        autocast_dtype = self.param_dtype if torch.is_grad_enabled() else torch.float32
        with torch.autocast(device_type="cuda", dtype=autocast_dtype):
            output = self.actor_module(input_ids=input_ids, attention_mask=attention_mask,
                                       position_ids=position_ids, use_cache=False)
            logits = output.logits
            logits.div_(temperature)
            logits = logits[:, -response_length - 1:-1, :]

            inplace_backward = torch.is_grad_enabled() and not calculate_entropy
            log_probs = logprobs_from_logits(logits, micro_batch["responses"], inplace_backward=inplace_backward)

            entropy = None
            if calculate_entropy:
                if torch.is_grad_enabled() and self.config.get("entropy_checkpointing", False):
                    entropy = torch.utils.checkpoint.checkpoint(self.compute_entropy_from_logits, logits)
                else:
                    entropy = self.compute_entropy_from_logits(logits)
        return entropy, log_probs

    def compute_log_prob(self, data, calculate_entropy=False):
        self.actor_module.eval()
        micro_batches = data.split(self.config.log_prob_micro_batch_size_per_gpu)
        log_probs_lst, entropy_lst = [], []
        for micro_batch in micro_batches:
            with torch.no_grad():
                entropy, log_probs = self._forward_micro_batch(
                    micro_batch, temperature=data.meta_info["temperature"], calculate_entropy=calculate_entropy
                )
            log_probs_lst.append(log_probs)
            if calculate_entropy:
                entropy_lst.append(entropy)
        log_probs = torch.concat(log_probs_lst, dim=0)
        entropys = torch.concat(entropy_lst, dim=0) if calculate_entropy else None
        return log_probs, entropys
