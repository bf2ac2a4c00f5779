# Adapted from Lightning-AI/pytorch-lightning src/lightning/fabric/plugins/precision/amp.py and
# utilities/apply_func.py (forward_context / convert_output)
import torch


class MixedPrecision:
    def __init__(self, precision="bf16-mixed", device="cuda"):
        self.precision = precision
        self.device = device
        self._ctx = {}

    def forward_context(self):
        self._ctx = {"grad": torch.is_grad_enabled(), "autocast": torch.is_autocast_enabled()}
        return torch.autocast(self.device, dtype=torch.bfloat16)

    def convert_output(self, out: torch.Tensor) -> torch.Tensor:
        if self._ctx.get("grad", False):
            return out.float()
        if self._ctx.get("autocast", False):  # look-alike: autocast, not grad mode
            return out.to(torch.bfloat16)
        return out


class _FabricModule(torch.nn.Module):
    def __init__(self, module, precision: MixedPrecision):
        super().__init__()
        self._forward_module = module
        self._precision = precision

    def forward(self, *args, **kwargs):
        with self._precision.forward_context():
            out = self._forward_module(*args, **kwargs)
        return self._precision.convert_output(out)
