from typing import Any, Dict, List, Optional

import torch

from .forward_context import set_forward_context


class GPUModelRunner:
    def __init__(self, model: torch.nn.Module, device: torch.device):
        self.model = model
        self.device = device

    def _prepare_inputs(self, scheduler_output: Dict[str, Any]):
        input_ids = torch.as_tensor(scheduler_output["input_ids"], device=self.device)
        positions = torch.as_tensor(scheduler_output["positions"], device=self.device)
        return input_ids, positions, scheduler_output.get("attn_metadata")

    def execute_model(self, scheduler_output: Dict[str, Any]) -> torch.Tensor:
        if torch.is_grad_enabled():
            raise RuntimeError("execute_model must be called under torch.inference_mode() or torch.no_grad()")
        input_ids, positions, attn_metadata = self._prepare_inputs(scheduler_output)
        with set_forward_context(attn_metadata):
            hidden_states = self.model(input_ids=input_ids, positions=positions)
        return hidden_states


class Worker:
    def __init__(self, model_runner: GPUModelRunner):
        self.model_runner = model_runner

    @torch.inference_mode()
    def execute_model(self, scheduler_output: Dict[str, Any]) -> Optional[torch.Tensor]:
        return self.model_runner.execute_model(scheduler_output)

    def sleep(self, level: int = 1) -> None:
        torch.cuda.empty_cache()

    def list_loras(self) -> List[int]:
        return []
