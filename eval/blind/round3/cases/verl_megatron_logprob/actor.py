# Modelled on verl/workers/actor/megatron_actor.py MegatronPPOActor (verl v0.4).
from functools import partial

import torch

from megatron.core.pipeline_parallel import get_forward_backward_func

from .config import LogitsForwardConfig
from .logits_utils import compute_logprobs_fn


class MegatronPPOActor:
    def __init__(self, config, actor_module, actor_optimizer=None):
        self.config = config
        self.actor_module = actor_module
        self.actor_optimizer = actor_optimizer

    def forward_backward_batch(self, data, forward_only=False, calculate_entropy=False):
        cfg = LogitsForwardConfig(
            temperature=data.meta_info["temperature"],
            calculate_entropy=calculate_entropy,
            use_fused_kernels=self.config.get("use_fused_kernels", False),
        )

        def forward_step(batch_iter, model):
            batch = next(batch_iter)
            output = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                           position_ids=batch["position_ids"])
            return output, partial(self._loss_or_logprob, batch=batch, cfg=cfg, forward_only=forward_only)

        forward_backward_func = get_forward_backward_func()
        return forward_backward_func(
            forward_step_func=forward_step, data_iterator=iter(data.split(self.config.micro_batch_size)),
            model=self.actor_module, num_microbatches=len(data) // self.config.micro_batch_size,
            seq_length=data.batch["input_ids"].shape[1], micro_batch_size=self.config.micro_batch_size,
            forward_only=forward_only,
        )

    def _loss_or_logprob(self, output, batch, cfg, forward_only):
        ret = compute_logprobs_fn(output, batch["responses"], cfg)
        if forward_only:
            return torch.tensor(1.0, device=output.device), ret
        return -ret["log_probs"].mean(), ret

    def compute_log_prob(self, data, calculate_entropy=False):
        self.actor_module.eval()
        with torch.no_grad():
            return self.forward_backward_batch(data, forward_only=True, calculate_entropy=calculate_entropy)
