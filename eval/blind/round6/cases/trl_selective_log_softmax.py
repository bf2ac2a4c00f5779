"""Per-token log-probabilities for policy and reference models."""
import torch
import torch.nn.functional as F


def selective_log_softmax(logits: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    fast_gather = logits.dtype in (torch.float32, torch.float64) and torch.is_grad_enabled()
    if fast_gather:
        selected_logits = torch.gather(logits, dim=-1, index=index.unsqueeze(-1)).squeeze(-1)
        logsumexp_values = torch.stack([torch.logsumexp(lg, dim=-1) for lg in logits])
        per_token_logps = selected_logits - logsumexp_values
    else:
        per_token_logps = []
        for row_logits, row_labels in zip(logits, index):
            row_logps = F.log_softmax(row_logits.float(), dim=-1).to(logits.dtype)
            row_per_token_logps = row_logps.gather(dim=-1, index=row_labels.unsqueeze(-1)).squeeze(-1)
            per_token_logps.append(row_per_token_logps)
        per_token_logps = torch.stack(per_token_logps)
    return per_token_logps


def make_inputs_require_grad(module, inputs, output):
    if torch.is_grad_enabled():
        output.requires_grad_(True)
    return output


def prepare_model_for_gradient_checkpointing(model):
    embeddings = model.get_input_embeddings()
    handle = embeddings.register_forward_hook(make_inputs_require_grad)
    model._require_grads_hook = handle
    return model


def get_per_token_logps(model, input_ids, attention_mask, logits_to_keep, temperature=1.0, batch_size=None):
    batch_size = batch_size or input_ids.size(0)
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
        logits = logits / temperature
        logps = selective_log_softmax(logits, input_ids_batch)
        all_logps.append(logps)
    return torch.cat(all_logps, dim=0)
