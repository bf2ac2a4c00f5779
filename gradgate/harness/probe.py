"""Observe, per module forward, whether TransformerEngine takes the UserBuffers overlap path.

TE decides in ``_LayerNormLinear.forward`` / ``_LayerNormMLP.forward`` whether to overlap;
when it does, it (a) fetches a communicator with ``get_ub(name, fp8)``, (b) copies the local
shard into the UserBuffers buffer with ``fill_userbuffers_buffer_for_all_gather`` (all-gather
overlap) and (c) hands that communicator to ``general_gemm(..., ub=..., ub_type=AG|RS)``.
When it does not, none of the three happens and NCCL collectives are used instead.

:class:`OverlapProbe` counts those three calls with the runtime witness's probes
(:class:`gradgate.witness.probes.Probe`, replaced in the ``layernorm_linear`` and
``layernorm_mlp`` module namespaces where the forward looks them up, calling straight
through to TE) and brackets each call of a watched module with forward hooks, so every call
is attributed to the forward (or the backward) that made it. The communicator objects
themselves are passed to TE untouched (they are pybind objects that the C++ GEMM needs), so
a call is attributed to a buffer by the name ``get_ub`` fetched it with. Unlike the
witness's recorder, no dispatch mode is active: the timed forwards run at full speed.

Imports torch (in :meth:`OverlapProbe.watch`); only used inside torchrun ranks.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from ..records import field, record
from ..witness.probes import InstalledProbes, Probe

TE_MODULES = (
    "transformer_engine.pytorch.module.layernorm_linear",
    "transformer_engine.pytorch.module.layernorm_mlp",
)


@record(frozen=False)
class ForwardRecord:
    module: str  # label given to watch()
    grad_enabled: bool  # torch.is_grad_enabled() when the forward started
    calls: Counter = field(default_factory=Counter)  # "fill_ag:qkv_fprop", "gemm_RS:fc2_fprop", ...

    def count(self, kind: str, ub_name: str) -> int:
        return self.calls[f"{kind}:{ub_name}"]


class OverlapProbe:
    def __init__(self, te_modules: tuple[str, ...] = TE_MODULES) -> None:
        self._te_modules = te_modules
        self._installed: InstalledProbes | None = None
        self._ub_names: dict[int, str] = {}
        self._stack: list[ForwardRecord] = []
        self.forwards: list[ForwardRecord] = []
        self.outside_forward: Counter = Counter()  # backward-pass calls
        self._handles: list = []

    # -- installation -------------------------------------------------------------------
    def probes(self) -> list[Probe]:
        """The witness probes: ``get_ub`` (names its communicator), the all-gather fill and
        the GEMMs that run on a communicator, in each TE module namespace."""
        out = []
        for module_name in self._te_modules:
            out += [
                Probe(f"{module_name}:get_ub", "get_ub", describe=self._describe_get_ub, on_result=self._name_ub),
                Probe(f"{module_name}:fill_userbuffers_buffer_for_all_gather", "fill_ag", describe=self._describe_fill),
                Probe(f"{module_name}:general_gemm", "gemm", describe=self._describe_gemm),
            ]
        return out

    def install(self) -> OverlapProbe:
        self._installed = InstalledProbes(self.probes(), self._record)
        return self

    def uninstall(self) -> None:
        if self._installed is not None:
            self._installed.uninstall()
            self._installed = None
        self.clear_hooks()

    def _record(self, probe: Probe, detail: str | None) -> None:
        key = f"{probe.name}:{detail}" if probe.name != "gemm" else str(detail)
        if self._stack:
            self._stack[-1].calls[key] += 1
        else:
            self.outside_forward[key] += 1

    def _name_of(self, ub: Any) -> str:
        return self._ub_names.get(id(ub), "<unknown>")

    @staticmethod
    def _describe_get_ub(args: tuple, kwargs: dict) -> str:
        return str(args[0] if args else kwargs.get("name"))

    def _name_ub(self, args: tuple, kwargs: dict, ub: Any) -> None:
        self._ub_names[id(ub)] = self._describe_get_ub(args, kwargs)

    def _describe_fill(self, args: tuple, kwargs: dict) -> str:
        return self._name_of(args[0] if args else kwargs.get("comm"))

    def _describe_gemm(self, args: tuple, kwargs: dict) -> str | None:
        ub = kwargs.get("ub")
        if ub is None:
            return None  # a plain GEMM: not counted
        ub_type = kwargs.get("ub_type")
        return f"gemm_{getattr(ub_type, 'name', str(ub_type))}:{self._name_of(ub)}"

    # -- forward bracketing -------------------------------------------------------------
    def watch(self, module: Any, label: str) -> None:
        import torch

        def pre_hook(_mod: Any, _inputs: Any) -> None:
            record = ForwardRecord(module=label, grad_enabled=torch.is_grad_enabled())
            self._stack.append(record)
            self.forwards.append(record)

        def post_hook(_mod: Any, _inputs: Any, _output: Any) -> None:
            if self._stack:
                self._stack.pop()

        self._handles.append(module.register_forward_pre_hook(pre_hook))
        self._handles.append(module.register_forward_hook(post_hook))

    def clear_hooks(self) -> None:
        """Stop watching every module watched so far (the TE wrappers stay installed)."""
        for handle in self._handles:
            handle.remove()
        self._handles.clear()
        self._stack.clear()

    def reset(self) -> None:
        self._stack.clear()
        self.forwards.clear()
        self.outside_forward.clear()

    def forwards_of(self, label: str) -> list[ForwardRecord]:
        return [record for record in self.forwards if record.module == label]


def overlap_counts(module_kind: str, record: ForwardRecord, ub_name: str = "qkv") -> dict:
    """The calls that show the forward overlap path was taken, for one forward."""
    if module_kind == "LayerNormLinear":
        fprop = f"{ub_name}_fprop"
        counts = {
            "ag_fill_calls": record.count("fill_ag", fprop),
            "ag_gemm_calls": record.count("gemm_AG", fprop),
        }
        counts["overlap_used"] = counts["ag_fill_calls"] > 0 and counts["ag_gemm_calls"] > 0
        return counts
    if module_kind == "LayerNormMLP":
        counts = {
            "ag_fill_calls": record.count("fill_ag", "fc1_fprop"),
            "ag_gemm_calls": record.count("gemm_AG", "fc1_fprop"),
            "rs_gemm_calls": record.count("gemm_RS", "fc2_fprop"),
        }
        counts["overlap_used"] = (
            counts["ag_fill_calls"] > 0 and counts["ag_gemm_calls"] > 0 and counts["rs_gemm_calls"] > 0
        )
        return counts
    raise ValueError(f"unknown module kind {module_kind!r}")
