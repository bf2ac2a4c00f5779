"""Observe, per module forward, whether TransformerEngine takes the UserBuffers overlap path.

TE decides in ``_LayerNormLinear.forward`` / ``_LayerNormMLP.forward`` whether to overlap;
when it does, it (a) fetches a communicator with ``get_ub(name, fp8)``, (b) copies the local
shard into the UserBuffers buffer with ``fill_userbuffers_buffer_for_all_gather`` (all-gather
overlap) and (c) hands that communicator to ``general_gemm(..., ub=..., ub_type=AG|RS)``.
When it does not, none of the three happens and NCCL collectives are used instead.

:class:`OverlapProbe` replaces those three names in the ``layernorm_linear`` and
``layernorm_mlp`` module namespaces (where the forward looks them up) with counting wrappers
that call straight through to TE, and brackets each call of a watched module with forward
hooks, so every call is attributed to the forward (or the backward) that made it. The
communicator objects themselves are passed to TE untouched (they are pybind objects that the
C++ GEMM needs), so a call is attributed to a buffer by the name ``get_ub`` fetched it with.

Imports torch and transformer_engine; only used inside torchrun ranks.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

TE_MODULES = (
    "transformer_engine.pytorch.module.layernorm_linear",
    "transformer_engine.pytorch.module.layernorm_mlp",
)


@dataclass
class ForwardRecord:
    module: str  # label given to watch()
    grad_enabled: bool  # torch.is_grad_enabled() when the forward started
    calls: Counter = field(default_factory=Counter)  # "fill_ag:qkv_fprop", "gemm_RS:fc2_fprop", ...

    def count(self, kind: str, ub_name: str) -> int:
        return self.calls[f"{kind}:{ub_name}"]


class OverlapProbe:
    def __init__(self) -> None:
        self._saved: list[tuple[object, str, object]] = []
        self._ub_names: dict[int, str] = {}
        self._stack: list[ForwardRecord] = []
        self.forwards: list[ForwardRecord] = []
        self.outside_forward: Counter = Counter()  # backward-pass calls
        self._handles: list = []

    # -- installation -------------------------------------------------------------------
    def install(self) -> "OverlapProbe":
        import importlib

        for module_name in TE_MODULES:
            mod = importlib.import_module(module_name)
            self._wrap(mod, "get_ub", self._make_get_ub)
            self._wrap(mod, "fill_userbuffers_buffer_for_all_gather", self._make_fill)
            self._wrap(mod, "general_gemm", self._make_gemm)
        return self

    def uninstall(self) -> None:
        for mod, name, original in reversed(self._saved):
            setattr(mod, name, original)
        self._saved.clear()
        self.clear_hooks()

    def _wrap(self, mod, name: str, factory) -> None:
        original = getattr(mod, name)
        self._saved.append((mod, name, original))
        wrapper = factory(original)
        wrapper.__wrapped__ = original
        setattr(mod, name, wrapper)

    def _record(self, key: str) -> None:
        if self._stack:
            self._stack[-1].calls[key] += 1
        else:
            self.outside_forward[key] += 1

    def _name_of(self, ub) -> str:
        return self._ub_names.get(id(ub), "<unknown>")

    def _make_get_ub(self, original):
        def get_ub(name, *args, **kwargs):
            ub = original(name, *args, **kwargs)
            self._ub_names[id(ub)] = name
            self._record(f"get_ub:{name}")
            return ub

        return get_ub

    def _make_fill(self, original):
        def fill_userbuffers_buffer_for_all_gather(comm, *args, **kwargs):
            self._record(f"fill_ag:{self._name_of(comm)}")
            return original(comm, *args, **kwargs)

        return fill_userbuffers_buffer_for_all_gather

    def _make_gemm(self, original):
        def general_gemm(*args, **kwargs):
            ub = kwargs.get("ub")
            if ub is not None:
                ub_type = kwargs.get("ub_type")
                kind = getattr(ub_type, "name", str(ub_type))
                self._record(f"gemm_{kind}:{self._name_of(ub)}")
            return original(*args, **kwargs)

        return general_gemm

    # -- forward bracketing -------------------------------------------------------------
    def watch(self, module, label: str) -> None:
        import torch

        def pre_hook(_mod, _inputs):
            record = ForwardRecord(module=label, grad_enabled=torch.is_grad_enabled())
            self._stack.append(record)
            self.forwards.append(record)

        def post_hook(_mod, _inputs, _output):
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
