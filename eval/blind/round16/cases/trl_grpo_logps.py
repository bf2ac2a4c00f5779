# adapted from huggingface/trl trl/trainer/grpo_trainer.py
import torch
import torch.nn.functional as F


def selective_log_softmax(logits, index):
    """A memory-efficient implementation of the common `log_softmax -> gather` operation."""
    if logits.dtype in [torch.float32, torch.float64]:
        selected_logits = torch.gather(logits, dim=-1, index=index.unsqueeze(-1)).squeeze(-1)
        logsumexp_values = torch.stack([torch.logsumexp(lg, dim=-1) for lg in logits])
        return selected_logits - logsumexp_values
    per_token_logps = []
    for row_logits, row_labels in zip(logits, index):
        row_logps = F.log_softmax(row_logits, dim=-1)
        per_token_logps.append(row_logps.gather(dim=-1, index=row_labels.unsqueeze(-1)).squeeze(-1))
    return torch.stack(per_token_logps)


class GRPOTrainer:
    def __init__(self, model, temperature: float = 1.0):
        self.model = model
        self.temperature = temperature
        self._grad_logp_calls = 0

    def _get_per_token_logps(self, model, input_ids, attention_mask, logits_to_keep):
        # We add 1 to `logits_to_keep` because the last logits of the sequence is later excluded
        logits = model(input_ids=input_ids, attention_mask=attention_mask, logits_to_keep=logits_to_keep + 1).logits
        logits = logits[:, :-1, :]
        input_ids = input_ids[:, -logits_to_keep:]
        logits = logits[:, -logits_to_keep:]
        logits = logits / self.temperature
        if torch.is_grad_enabled():
            self._grad_logp_calls += 1
        match (torch.is_grad_enabled(), logits.dtype):
            case (True, torch.bfloat16 | torch.float16):
                return selective_log_softmax(logits.float(), input_ids)
            case (True, _):
                return selective_log_softmax(logits, input_ids)
            case _:
                return torch.gather(logits.log_softmax(-1), dim=-1, index=input_ids.unsqueeze(-1)).squeeze(-1)

    def _generate_and_score_completions(self, prompt_completion_ids, attention_mask, logits_to_keep):
        with torch.no_grad():
            old_per_token_logps = self._get_per_token_logps(
                self.model, prompt_completion_ids, attention_mask, logits_to_keep
            )
        return old_per_token_logps

    def _compute_loss(self, model, inputs, logits_to_keep):
        per_token_logps = self._get_per_token_logps(model, inputs["input_ids"], inputs["attention_mask"], logits_to_keep)
        coef = torch.exp(per_token_logps - inputs["old_per_token_logps"])
        return -(coef * inputs["advantages"].unsqueeze(1)).mean()
