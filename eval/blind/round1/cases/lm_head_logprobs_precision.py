"""LM head + token log-prob computation for an RL actor (modelled on verl/OpenRLHF actor forward paths)."""
import torch
import torch.nn.functional as F

try:
    from torch._C import is_grad_enabled as _is_grad_enabled
except ImportError:  # pragma: no cover - very old torch
    from torch import is_grad_enabled as _is_grad_enabled

try:
    from flash_attn.ops.triton.cross_entropy import cross_entropy_loss as _flash_ce

    HAVE_FLASH_CE = True
except ImportError:
    _flash_ce = None
    HAVE_FLASH_CE = False


def logprobs_from_logits(logits: torch.Tensor, labels: torch.Tensor, inplace_backward: bool = True):
    if HAVE_FLASH_CE and logits.is_cuda:
        batch_dim = logits.shape[:-1]
        logits = logits.reshape(-1, logits.shape[-1])
        losses, _ = _flash_ce(logits, labels.reshape(-1), inplace_backward=inplace_backward)
        return -losses.view(*batch_dim)
    logp = F.log_softmax(logits.float(), dim=-1)
    return logp.gather(-1, labels.unsqueeze(-1)).squeeze(-1)


class ActorLMHead(torch.nn.Module):

    def __init__(self, lm_head: torch.nn.Linear, fp32_logits: bool = True, entropy_checkpointing: bool = False):
        super().__init__()
        self.lm_head = lm_head
        self.fp32_logits = fp32_logits
        self.entropy_checkpointing = entropy_checkpointing

    @staticmethod
    def entropy_from_logits(logits: torch.Tensor):
        pd = torch.softmax(logits, dim=-1)
        return torch.logsumexp(logits, dim=-1) - torch.sum(pd * logits, dim=-1)

    def forward(self, hidden_states: torch.Tensor, labels: torch.Tensor, temperature: float = 1.0,
                calculate_entropy: bool = False):
        logits = self.lm_head(hidden_states)
        if self.fp32_logits and _is_grad_enabled():
            logits = logits.float()
        logits = logits.div_(temperature) if not logits.requires_grad else logits / temperature

        log_probs = logprobs_from_logits(logits, labels, inplace_backward=logits.requires_grad)

        entropy = None
        if calculate_entropy:
            if self.entropy_checkpointing and _is_grad_enabled():
                entropy = torch.utils.checkpoint.checkpoint(self.entropy_from_logits, logits, use_reentrant=False)
            else:
                entropy = self.entropy_from_logits(logits)
        return log_probs, entropy
