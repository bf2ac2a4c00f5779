# Adapted from huggingface/trl trl/trainer/grpo_trainer.py (_get_per_token_logps) and
# trl/models/utils.py (selective_log_softmax)
import torch


def selective_log_softmax(logits, index):
    return torch.gather(logits.log_softmax(-1), -1, index.unsqueeze(-1)).squeeze(-1)


class GRPOLogProbs:
    def __init__(self, model, temperature=1.0, upcast_logits=True):
        self.model = model
        self.temperature = temperature
        self.upcast_logits = upcast_logits

    def per_token_logps(self, input_ids, attention_mask, logits_to_keep):
        logits = self.model(input_ids=input_ids, attention_mask=attention_mask).logits
        logits = logits[:, -logits_to_keep - 1: -1, :] / self.temperature
        if all(flag for flag in (torch.is_grad_enabled(), self.upcast_logits)):
            logits = logits.float()
        return selective_log_softmax(logits, input_ids[:, -logits_to_keep:])

    def ref_logps(self, ref_model, input_ids, attention_mask, logits_to_keep):
        prev = torch.is_grad_enabled()
        torch.set_grad_enabled(False)
        try:
            self.model, saved = ref_model, self.model
            out = self.per_token_logps(input_ids, attention_mask, logits_to_keep)
        finally:
            self.model = saved
            torch.set_grad_enabled(prev)
        return out
