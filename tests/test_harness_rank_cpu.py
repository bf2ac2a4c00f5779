"""The harness's rank side on a CPU: the real `rank_cases.run_case` and `OverlapProbe` on a
stand-in for TransformerEngine, in every mode, on a one-rank gloo process group.

The stand-in has TE's shape where the harness touches it: `get_ub`,
`fill_userbuffers_buffer_for_all_gather` and `general_gemm` looked up in the
`layernorm_linear` / `layernorm_mlp` module namespaces, and modules whose forward gates the
requested overlap on grad mode ("stock", TE #2902) or not ("fixed"). What it proves is the
harness's bookkeeping (forwards per mode and phase, calls counted per forward, backward calls
kept apart, tensors compared, verdicts); the GPU run proves TE's behaviour.
"""

from __future__ import annotations

import argparse
import contextlib
import enum
import sys
import types
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")

from gradgate.harness import rank_cases, report  # noqa: E402
from gradgate.harness.cases import MODES  # noqa: E402
from gradgate.harness.probe import OverlapProbe  # noqa: E402
from gradgate.harness.rank_setup import RankContext  # noqa: E402

LNL_NS = "transformer_engine.pytorch.module.layernorm_linear"
MLP_NS = "transformer_engine.pytorch.module.layernorm_mlp"


class UbType(enum.Enum):
    AG = 1
    RS = 2


def _namespace(name: str) -> types.ModuleType:
    ns = types.ModuleType(name)
    ubs: dict[str, object] = {}
    ns.get_ub = lambda ub_name, fp8=False: ubs.setdefault(ub_name, object())
    ns.fill_userbuffers_buffer_for_all_gather = lambda comm, x, *args, **kwargs: x
    ns.general_gemm = lambda a, b, ub=None, ub_type=None: b @ a.t()
    return ns


def _fake_te(gated: bool) -> types.SimpleNamespace:
    lnl, mlp = _namespace(LNL_NS), _namespace(MLP_NS)

    class LayerNormLinear(torch.nn.Module):
        def __init__(self, hidden, out, *, ub_overlap_ag, ub_name=None, params_dtype, **_):
            super().__init__()
            self.ub_overlap_ag, self.ub_name = ub_overlap_ag, ub_name
            self.weight = torch.nn.Parameter(torch.randn(out, hidden, dtype=params_dtype))

        def forward(self, x):
            overlap = self.ub_overlap_ag and (torch.is_grad_enabled() or not gated)
            if overlap:
                ub = lnl.get_ub(f"{self.ub_name}_fprop")
                x = lnl.fill_userbuffers_buffer_for_all_gather(ub, x)
                return lnl.general_gemm(self.weight, x, ub=ub, ub_type=UbType.AG)
            return lnl.general_gemm(self.weight, x)

    class LayerNormMLP(torch.nn.Module):
        def __init__(self, hidden, ffn, *, ub_overlap_ag, ub_overlap_rs, params_dtype, **_):
            super().__init__()
            self.overlap = ub_overlap_ag and ub_overlap_rs
            self.fc1_weight = torch.nn.Parameter(torch.randn(ffn, hidden, dtype=params_dtype) / 8)
            self.fc2_weight = torch.nn.Parameter(torch.randn(hidden, ffn, dtype=params_dtype) / 8)

        def forward(self, x):
            if self.overlap and (torch.is_grad_enabled() or not gated):
                ag, rs = mlp.get_ub("fc1_fprop"), mlp.get_ub("fc2_fprop")
                x = mlp.fill_userbuffers_buffer_for_all_gather(ag, x)
                h = mlp.general_gemm(self.fc1_weight, x, ub=ag, ub_type=UbType.AG)
                return mlp.general_gemm(self.fc2_weight, h, ub=rs, ub_type=UbType.RS)
            return mlp.general_gemm(self.fc2_weight, mlp.general_gemm(self.fc1_weight, x))

    te = types.SimpleNamespace(
        LayerNormLinear=LayerNormLinear,
        LayerNormMLP=LayerNormMLP,
        autocast=lambda **kwargs: contextlib.nullcontext(),
    )
    return te, {LNL_NS: lnl, MLP_NS: mlp}


@pytest.fixture(scope="module")
def one_rank():
    if not dist.is_initialized():
        dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
        yield
        dist.destroy_process_group()
    else:
        yield


def _run(monkeypatch, gated: bool, label: str) -> list[dict]:
    te, namespaces = _fake_te(gated)
    for name, ns in namespaces.items():
        monkeypatch.setitem(sys.modules, name, ns)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a, **k: None)
    monkeypatch.setattr(torch.cuda, "manual_seed", lambda seed: None)
    args = argparse.Namespace(
        te_label=label, hidden_size=32, seq_length=32, batch_size=2, seed=1234, result_file=Path("unused")
    )
    ctx = RankContext(
        args,
        rank=0,
        world=1,
        local_rank=0,
        result={},
        device=torch.device("cpu"),
        tp_group=dist.group.WORLD,
        tp=1,
        te=te,
        probe=OverlapProbe(),
    )
    ctx.probe.install()
    try:
        cases = []
        for kind in ("LayerNormLinear", "LayerNormMLP"):
            for mode in MODES:
                cases.append(rank_cases.run_case(ctx, kind, "bf16", mode))
                ctx.probe.clear_hooks()
        return cases
    finally:
        ctx.probe.uninstall()


def test_modes_include_non_reentrant_checkpointing():
    assert MODES == ("no_grad", "grad", "checkpoint_reentrant", "checkpoint_non_reentrant")
    assert rank_cases.PHASES["checkpoint_non_reentrant"] == ["first_forward", "recompute"]


def test_stock_stand_in_reproduces_the_bug_in_each_mode(monkeypatch, one_rank):
    cases = _run(monkeypatch, gated=True, label="stock")
    seen = {
        (c["module"], c["mode"]): [(f["phase"], f["grad_enabled"], f["overlap_used"]) for f in c["forwards"]]
        for c in cases
    }
    for module in ("LayerNormLinear", "LayerNormMLP"):
        assert seen[module, "no_grad"] == [("forward", False, False)]
        assert seen[module, "grad"] == [("forward", True, True)]
        assert seen[module, "checkpoint_reentrant"] == [("first_forward", False, False), ("recompute", True, True)]
        # non-reentrant checkpointing runs its first forward with grad on: no drop to see
        assert seen[module, "checkpoint_non_reentrant"] == [("first_forward", True, True), ("recompute", True, True)]
    verdicts = {(c["module"], c["mode"]): report.case_verdict(c)[0] for c in cases}
    assert verdicts == {
        (m, mode): {"no_grad": "BUG", "grad": "OK", "checkpoint_reentrant": "BUG", "checkpoint_non_reentrant": "OK"}[
            mode
        ]
        for m in ("LayerNormLinear", "LayerNormMLP")
        for mode in MODES
    }
    mlp = next(c for c in cases if (c["module"], c["mode"]) == ("LayerNormMLP", "checkpoint_non_reentrant"))
    assert [(f["ag_fill_calls"], f["ag_gemm_calls"], f["rs_gemm_calls"]) for f in mlp["forwards"]] == [(1, 1, 1)] * 2
    assert all(c["matches_reference"] and c["bitwise_equal"] and c["reference_userbuffers_calls"] == 0 for c in cases)
    grad = next(c for c in cases if (c["module"], c["mode"]) == ("LayerNormLinear", "grad"))
    assert [t["name"] for t in grad["tensors"]] == ["output", "input.grad", "weight.grad"]
    assert grad["backward_userbuffers_calls"] == {}


def test_fixed_stand_in_passes_in_each_mode(monkeypatch, one_rank):
    cases = _run(monkeypatch, gated=False, label="fixed")
    assert [report.case_verdict(c)[0] for c in cases] == ["PASS"] * 8
    lnl = next(c for c in cases if (c["module"], c["mode"]) == ("LayerNormLinear", "checkpoint_non_reentrant"))
    assert report.case_verdict(lnl) == ("PASS", "overlap path taken in 2/2 forwards; bitwise equal to the reference")
    assert [(f["ag_fill_calls"], f["ag_gemm_calls"]) for f in lnl["forwards"]] == [(1, 1), (1, 1)]


def test_probe_restores_the_namespaces(monkeypatch):
    _te, namespaces = _fake_te(gated=True)
    for name, ns in namespaces.items():
        monkeypatch.setitem(sys.modules, name, ns)
    before = {
        name: (ns.get_ub, ns.fill_userbuffers_buffer_for_all_gather, ns.general_gemm) for name, ns in namespaces.items()
    }
    probe = OverlapProbe().install()
    lnl = namespaces[LNL_NS]
    assert lnl.general_gemm is not before[LNL_NS][2] and lnl.general_gemm.__wrapped__ is before[LNL_NS][2]
    ub = lnl.get_ub("qkv_fprop")
    lnl.fill_userbuffers_buffer_for_all_gather(ub, torch.ones(1))
    lnl.general_gemm(torch.ones(1, 1), torch.ones(1, 1), ub=ub, ub_type=UbType.RS)
    lnl.general_gemm(torch.ones(1, 1), torch.ones(1, 1))
    # outside a watched forward: the backward's calls
    assert dict(probe.outside_forward) == {"get_ub:qkv_fprop": 1, "fill_ag:qkv_fprop": 1, "gemm_RS:qkv_fprop": 1}
    probe.uninstall()
    assert {
        name: (ns.get_ub, ns.fill_userbuffers_buffer_for_all_gather, ns.general_gemm) for name, ns in namespaces.items()
    } == before
