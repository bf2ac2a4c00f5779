# adapted from vllm-project/vllm vllm/model_executor/layers/fused_moe/runner/default_moe_runner.py
from dataclasses import dataclass

import torch
import vllm.envs as envs


@dataclass
class MoEForwardFlags:
    use_dbo: bool
    grad: bool


def current_flags() -> MoEForwardFlags:
    return MoEForwardFlags(use_dbo=envs.VLLM_ENABLE_DBO, grad=torch.is_grad_enabled())
