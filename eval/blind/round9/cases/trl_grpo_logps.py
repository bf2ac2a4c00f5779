from typing import Optional

import torch
import torch.nn.functional as F
from transformers import PreTrainedModel


def selective_log_softmax(logits: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    if logits.dtype in [torch.float32, torch.float64]:
        selected_logits = torch.gather(logits, dim=-1, index=index.unsqueeze(-1)).squeeze(-1)
        logsumexp_values = torch.stack([torch.logsumexp(lg, dim=-1) for lg in logits])
        per_token_logps = selected_logits - logsumexp_values
    else:
        per_token_logps = []
        for row_logits, row_labels in zip(logits, index):
            row_logps = F.log_softmax(row_logits, dim=-1)
            row_per_token_logps = row_logps.gather(dim=-1, index=row_labels.unsqueeze(-1)).squeeze(-1)
            per_token_logps.append(row_per_token_logps)
        per_token_logps = torch.stack(per_token_logps)
    return per_token_logps


class GRPOTrainer:
    def __init__(self, model: PreTrainedModel, ref_model: Optional[PreTrainedModel], args):
        self.model = model
        self.ref_model = ref_model
        self.args = args
        self.temperature = args.temperature
        self.beta = args.beta

    def _get_per_token_logps(self, model, input_ids, attention_mask, logits_to_keep, batch_size=None):
        batch_size = batch_size or input_ids.size(0)
        forward_flags = {
            "scale_by_temperature": torch.is_grad_enabled(),
            "logits_to_keep": logits_to_keep + 1,
        }
        all_logps = []
        for start in range(0, input_ids.size(0), batch_size):
            input_ids_batch = input_ids[start : start + batch_size]
            attention_mask_batch = attention_mask[start : start + batch_size]
            logits = model(
                input_ids=input_ids_batch,
                attention_mask=attention_mask_batch,
                logits_to_keep=forward_flags["logits_to_keep"],
            ).logits
            logits = logits[:, :-1, :]
            input_ids_batch = input_ids_batch[:, -logits_to_keep:]
            logits = logits[:, -logits_to_keep:]
            if forward_flags["scale_by_temperature"]:
                logits = logits / self.temperature
            logps = selective_log_softmax(logits, input_ids_batch)
            all_logps.append(logps)
        return torch.cat(all_logps, dim=0)

    def _generate_and_score_completions(self, prompt_completion_ids, attention_mask, logits_to_keep):
        batch_size = self.args.per_device_train_batch_size
        with torch.no_grad():
            if self.args.num_iterations > 1:
                old_per_token_logps = self._get_per_token_logps(
                    self.model, prompt_completion_ids, attention_mask, logits_to_keep, batch_size
                )
            else:
                old_per_token_logps = None
            if self.beta == 0.0:
                ref_per_token_logps = None
            else:
                ref_per_token_logps = self._get_per_token_logps(
                    self.ref_model, prompt_completion_ids, attention_mask, logits_to_keep, batch_size
                )
        return old_per_token_logps, ref_per_token_logps

    def compute_loss(self, inputs, logits_to_keep):
        per_token_logps = self._get_per_token_logps(
            self.model, inputs["input_ids"], inputs["attention_mask"], logits_to_keep
        )
        old = inputs["old_per_token_logps"]
        old = per_token_logps.detach() if old is None else old
        coef = torch.exp(per_token_logps - old)
        per_token_loss = -coef * inputs["advantages"].unsqueeze(1)
        if self.beta != 0.0:
            ref = inputs["ref_per_token_logps"]
            per_token_kl = torch.exp(ref - per_token_logps) - (ref - per_token_logps) - 1
            per_token_loss = per_token_loss + self.beta * per_token_kl
        mask = inputs["completion_mask"]
        return ((per_token_loss * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1.0)).mean()
