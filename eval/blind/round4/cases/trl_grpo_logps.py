# Modeled on trl/trainer/grpo_trainer.py (GRPOTrainer._get_per_token_logps) and
# trl/trainer/utils.py (selective_log_softmax).
import torch
import torch.nn.functional as F


def selective_log_softmax(logits, index):
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


class GRPOTrainerMixin:
    def _maybe_enable_checkpointing(self, model):
        # Reentrant checkpointing only matters when a backward will follow.
        if self.args.gradient_checkpointing and torch.is_grad_enabled():
            model.gradient_checkpointing_enable(
                gradient_checkpointing_kwargs=self.args.gradient_checkpointing_kwargs
            )

    def _get_per_token_logps(self, model, input_ids, attention_mask, logits_to_keep, batch_size=None):
        batch_size = batch_size or input_ids.size(0)
        self._maybe_enable_checkpointing(model)
        all_logps = []
        for i in range(0, input_ids.size(0), batch_size):
            input_ids_batch = input_ids[i : i + batch_size]
            attention_mask_batch = attention_mask[i : i + batch_size]
            logits = model(
                input_ids=input_ids_batch,
                attention_mask=attention_mask_batch,
                logits_to_keep=logits_to_keep + 1,
            ).logits
            logits = logits[:, :-1, :]
            input_ids_batch = input_ids_batch[:, -logits_to_keep:]
            logits = logits[:, -logits_to_keep:]
            if torch.is_grad_enabled():
                logits = logits.float()
            logits = logits / self.temperature
            logps = selective_log_softmax(logits, input_ids_batch)
            all_logps.append(logps)
        return torch.cat(all_logps, dim=0)

    def compute_old_logps(self, model, inputs, logits_to_keep):
        with torch.no_grad():
            return self._get_per_token_logps(
                model, inputs["input_ids"], inputs["attention_mask"], logits_to_keep
            )
