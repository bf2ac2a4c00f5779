# Adapted from volcengine/verl verl/utils/experimental/torch_functional.py (FusedLinearForPPOFunction)
# and verl/utils/torch_functional.py (logprobs_from_logits).
import torch
import torch.nn.functional as F


def _fused_linear_logprob_fwd(hidden_states, vocab_weights, input_ids, temperature):
    logits = (hidden_states @ vocab_weights.t()) / temperature
    orig_dtype = logits.dtype
    logits = logits.to(torch.float32)
    probs = logits.softmax(dim=-1)
    log_probs = logits.log_softmax(dim=-1)
    token_log_probs = log_probs.gather(-1, input_ids.unsqueeze(-1)).squeeze(-1)
    entropy = torch.logsumexp(logits, dim=-1) - torch.sum(probs * logits, dim=-1)
    return token_log_probs.to(orig_dtype), entropy.to(orig_dtype)


class FusedLinearForPPOFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, hidden_states, vocab_weights, input_ids, temperature, grad_enabled):
        if grad_enabled:
            ctx.save_for_backward(hidden_states, vocab_weights, input_ids)
            ctx.temperature = temperature
        return _fused_linear_logprob_fwd(hidden_states, vocab_weights, input_ids, temperature)


def _fused_logprob(hidden_states, vocab_weights, input_ids, temperature, grad_enabled):
    return FusedLinearForPPOFunction.apply(hidden_states, vocab_weights, input_ids, temperature, grad_enabled)


def _unfused_logprob(hidden_states, vocab_weights, input_ids, temperature, grad_enabled):
    logits = F.linear(hidden_states, vocab_weights).div_(temperature)
    log_probs = torch.log_softmax(logits, dim=-1).gather(-1, input_ids.unsqueeze(-1)).squeeze(-1)
    pd = torch.softmax(logits, dim=-1)
    entropy = torch.logsumexp(logits, dim=-1) - torch.sum(pd * logits, dim=-1)
    return log_probs, entropy


_LOGPROB_IMPLS = {True: _fused_logprob, False: _unfused_logprob}


def compute_log_prob_kernel(hidden_states, vocab_weights, input_ids, temperature, **kwargs):
    impl = _LOGPROB_IMPLS[kwargs.get("grad_enabled", True)]
    return impl(hidden_states, vocab_weights, input_ids, temperature, kwargs.get("grad_enabled", True))
