import torch
import torch.nn.functional as F
from torch import is_grad_enabled as _grad_enabled

try:
    from flash_attn.ops.triton.cross_entropy import cross_entropy_loss

    FLASH_ATTN_CROSS_ENTROPY_LOSS_AVAILABLE = True
except ImportError:
    FLASH_ATTN_CROSS_ENTROPY_LOSS_AVAILABLE = False


def logprobs_from_logits_v2(logits: torch.FloatTensor, labels):
    if logits.dtype in [torch.float32, torch.float64]:
        logits_labels = torch.gather(logits, dim=-1, index=labels.unsqueeze(-1)).squeeze(-1)
        logsumexp_values = torch.stack([torch.logsumexp(lg, dim=-1) for lg in logits])
        return logits_labels - logsumexp_values
    logprobs_labels = []
    for row_logits, row_labels in zip(logits, labels):
        row_logprobs = F.log_softmax(row_logits, dim=-1)
        logprobs_labels.append(row_logprobs.gather(dim=-1, index=row_labels.unsqueeze(-1)).squeeze(-1))
    return torch.stack(logprobs_labels)


def logprobs_from_logits(logits, labels):
    if FLASH_ATTN_CROSS_ENTROPY_LOSS_AVAILABLE and _grad_enabled():
        batch_dim = logits.shape[:-1]
        last_dim = logits.shape[-1]
        logits = logits.reshape(-1, last_dim)
        labels = labels.reshape(-1)
        output = cross_entropy_loss(logits, labels, inplace_backward=_grad_enabled())
        assert isinstance(output, tuple)
        return -output[0].view(*batch_dim)
    return logprobs_from_logits_v2(logits, labels)


def entropy_from_logits(logits: torch.Tensor):
    pd = torch.nn.functional.softmax(logits, dim=-1)
    return torch.logsumexp(logits, dim=-1) - torch.sum(pd * logits, dim=-1)


class DataParallelPPOActor:
    def __init__(self, config, actor_module, actor_optimizer=None):
        self.config = config
        self.actor_module = actor_module
        self.actor_optimizer = actor_optimizer
        self.use_remove_padding = config.get("use_remove_padding", False)
        self.entropy_checkpointing = config.get("entropy_checkpointing", False)

    def _forward_micro_batch(self, micro_batch, temperature, calculate_entropy=False):
        input_ids = micro_batch["input_ids"]
        response_length = micro_batch["responses"].size(-1)
        attention_mask = micro_batch["attention_mask"]
        position_ids = micro_batch["position_ids"]
        with torch.autocast(device_type="cuda", dtype=torch.bfloat16):
            output = self.actor_module(
                input_ids=input_ids, attention_mask=attention_mask,
                position_ids=position_ids, use_cache=False,
            )
            logits = output.logits
            logits.div_(temperature)
            logits = logits[:, -response_length - 1 : -1, :]
            log_probs = logprobs_from_logits(logits, micro_batch["responses"])
            entropy = None
            if calculate_entropy:
                if self.entropy_checkpointing and _grad_enabled():
                    entropy = torch.utils.checkpoint.checkpoint(entropy_from_logits, logits)
                else:
                    entropy = entropy_from_logits(logits)
        return entropy, log_probs

    def compute_log_prob(self, data, calculate_entropy=False):
        self.actor_module.eval()
        micro_batches = data.split(self.config.log_prob_micro_batch_size_per_gpu)
        log_probs_lst, entropy_lst = [], []
        for micro_batch in micro_batches:
            with torch.no_grad():
                entropy, log_probs = self._forward_micro_batch(
                    micro_batch, temperature=data.meta_info["temperature"],
                    calculate_entropy=calculate_entropy,
                )
            log_probs_lst.append(log_probs)
            if calculate_entropy:
                entropy_lst.append(entropy)
        log_probs = torch.concat(log_probs_lst, dim=0)
        entropys = torch.concat(entropy_lst, dim=0) if calculate_entropy else None
        return log_probs, entropys
