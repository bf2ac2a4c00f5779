# adapted from volcengine/verl verl/utils/torch_functional.py
import torch
import torch.nn.functional as F

try:
    from flash_attn.ops.triton.cross_entropy import cross_entropy_loss

    FLAH_ATTN_CROSS_ENTROPY_LOSS_AVAILABLE = True
except ImportError:
    FLAH_ATTN_CROSS_ENTROPY_LOSS_AVAILABLE = False


def logprobs_from_logits_v2(logits: torch.FloatTensor, labels):
    logprobs_labels = []
    for row_logits, row_labels in zip(logits, labels):
        row_logprobs = F.log_softmax(row_logits, dim=-1)
        logprobs_labels.append(row_logprobs.gather(dim=-1, index=row_labels.unsqueeze(-1)).squeeze(-1))
    return torch.stack(logprobs_labels)


def logprobs_from_logits(logits, labels, inplace_backward=True, calculate_entropy=False):
    """Compute per-token log-probs; `inplace_backward` lets the CE kernel reuse logits memory in backward."""
    if FLAH_ATTN_CROSS_ENTROPY_LOSS_AVAILABLE:
        batch_dim = logits.shape[:-1]
        last_dim = logits.shape[-1]
        # entropy is computed from the same logits afterwards, so they must survive
        reuse = inplace_backward and not calculate_entropy
        output = cross_entropy_loss(logits.reshape(-1, last_dim), labels.reshape(-1), inplace_backward=reuse)
        return -output[0].view(*batch_dim)
    return logprobs_from_logits_v2(logits, labels)


def entropy_from_logits(logits: torch.Tensor):
    pd = torch.nn.functional.softmax(logits, dim=-1)
    return torch.logsumexp(logits, dim=-1) - torch.sum(pd * logits, dim=-1)
