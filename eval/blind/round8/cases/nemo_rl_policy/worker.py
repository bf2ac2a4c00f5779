import torch

from .context import ForwardContext
from .cp import gather_logits, shard_for_cp
from .packing import prepare_inputs


class PolicyWorker:

    def __init__(self, model, cfg, cp_group=None):
        self.model = model
        self.cfg = cfg
        self.cp_group = cp_group

    def _forward(self, input_ids, lengths):
        ctx = ForwardContext(
            needs_backward=torch.is_grad_enabled(),
            sequence_packing=self.cfg["sequence_packing"]["enabled"],
            cp_group=self.cp_group,
        )
        inputs = prepare_inputs(input_ids, lengths, ctx)
        inputs, group = shard_for_cp(inputs, ctx)
        logits = self.model(**inputs).logits
        return gather_logits(logits, group, ctx)

    def get_logprobs(self, input_ids, lengths):
        with torch.no_grad():
            logits = self._forward(input_ids, lengths).float()
            return torch.log_softmax(logits, dim=-1)

    def train_step(self, input_ids, lengths, loss_fn, optimizer):
        logits = self._forward(input_ids, lengths)
        loss = loss_fn(logits)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return loss.detach()
