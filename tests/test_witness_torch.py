"""The runtime witness with torch: `gradgate witness` end to end on 2 gloo ranks (CPU), and
the library API in this process on a one-rank gloo group.

The synthetic modules of tests/witness_cases/families.py cover each family of bug that
gradgate's rules describe; each must diverge at the line that takes the other path, and
the correct uses of grad mode must not. `GRADGATE_WITNESS_BACKEND=nccl` and
`GRADGATE_WITNESS_NPROC=1` run the end-to-end part on one GPU instead.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # torch on 2 gloo ranks, 15 s

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")

from conftest import ROOT, run_cli  # noqa: E402

from gradgate.witness import ForwardPathsDiffer, Probe, assert_same_forward_paths, compare_forwards  # noqa: E402

CASES = ROOT / "tests" / "witness_cases"
FAMILIES = CASES / "families.py"
BACKEND = os.environ.get("GRADGATE_WITNESS_BACKEND", "gloo")
NPROC = int(os.environ.get("GRADGATE_WITNESS_NPROC", "2"))

BUGGY = (
    "case_overlap_gated_on_grad_mode",
    "case_collective_skipped_under_no_grad",
    "case_group_chosen_by_grad_mode",
    "case_dropout_off_under_no_grad",
)
CORRECT = ("case_saves_for_backward_under_grad", "case_no_backward_kernel_refused_under_grad")


def line_of(path: Path, text: str) -> int:
    """The 1-based line of ``path`` holding ``text`` (exactly one)."""
    (line,) = [i for i, src in enumerate(path.read_text().splitlines(), 1) if text in src]
    return line


def _witness(cases: Path, out: Path) -> tuple[subprocess.CompletedProcess, dict]:
    if BACKEND == "nccl" and not torch.cuda.is_available():
        pytest.skip("NCCL needs CUDA GPUs")
    proc = run_cli(
        "witness",
        str(cases),
        "--backend",
        BACKEND,
        "--nproc-per-node",
        str(NPROC),
        "--output",
        str(out),
        "--timeout",
        "300",
    )
    assert out.exists(), proc.stderr.decode()[-3000:]
    return proc, json.loads(out.read_text())


@pytest.fixture(scope="module")
def stock_run(tmp_path_factory):
    return _witness(FAMILIES, tmp_path_factory.mktemp("witness") / "report.json")


@pytest.fixture(scope="module")
def fixed_run(tmp_path_factory):
    """The families after the real `gradgate fix` on a copy of their file."""
    folder = tmp_path_factory.mktemp("fixed")
    fixed = folder / "families.py"
    shutil.copy(FAMILIES, fixed)
    fix = run_cli("fix", "--no-cache", str(fixed))
    proc, report = _witness(fixed, folder / "report.json")
    return fix, fixed, proc, report


def _case(report: dict, name: str) -> dict:
    (case,) = [c for c in report["cases"] if c["name"] == name]
    return case


def _partings(case: dict) -> list[tuple[str, int, int]]:
    return [(d["other"], d["parting"]["line"], d["parting"]["other_line"]) for d in case["divergences"]]


# -- gradgate witness, end to end --------------------------------------------------------
def test_witness_command_verdicts(stock_run):
    proc, report = stock_run
    assert proc.returncode == 1, proc.stderr.decode()[-2000:]
    lines = proc.stdout.decode().splitlines()
    assert [line.split()[0:2] for line in lines[:6]] == [["DIVERGES", f"{name}:"] for name in BUGGY] + [
        ["SAME", f"{name}:"] for name in CORRECT
    ]
    assert lines[-2] == "2 SAME, 4 DIVERGES; 4 of 4 finding(s) witnessed"
    assert report["complete"] is True and report["run_errors"] == []
    assert (report["backend"], report["world_size"]) == (BACKEND, NPROC)
    assert report["modes"] == ["grad", "no_grad", "checkpoint"]
    for name in (*BUGGY, *CORRECT):
        case = _case(report, name)
        assert case["divergences_per_rank"] == [len(case["divergences"])] * NPROC
        assert [(f["label"], f["grad_enabled"]) for f in case["forwards"]] == [
            ("grad", True),
            ("no_grad", False),
            ("checkpoint/first_forward", False),
            ("checkpoint/recompute", True),
        ]
        assert all(f["training"] is True for f in case["forwards"])
    for name in CORRECT:
        assert _case(report, name)["divergences"] == [] and _case(report, name)["same"] is True


def test_overlap_gated_on_grad_mode(stock_run):
    _, report = stock_run
    case = _case(report, "case_overlap_gated_on_grad_mode")
    overlap = line_of(FAMILIES, "gathered = x.new_empty((x.shape[0] * dist.get_world_size()")
    plain = line_of(FAMILIES, "gathered = x.repeat(dist.get_world_size(), 1)")
    assert _partings(case) == [("no_grad", overlap, plain), ("checkpoint/first_forward", overlap, plain)]
    d = case["divergences"][0]
    assert [(e["kind"], e["name"]) for e in d["expected"]] == [
        ("aten", "aten.new_empty"),
        ("collective", "all_gather_into_tensor"),
    ]
    assert [(e["kind"], e["name"]) for e in d["found"]] == [("aten", "aten.repeat")]
    gather = d["expected"][1]
    assert gather["detail"] == {
        "group_ranks": list(range(NPROC)),
        "group_size": NPROC,
        "group_name": "0",
        "async": False,
        "shapes": [[2 * NPROC, 4], [2, 4]],
    }
    assert gather["stack"][-1]["line"] == line_of(FAMILIES, "dist.all_gather_into_tensor(gathered, x)\n".strip())
    gate = line_of(FAMILIES, "ub_overlap_ag = ub_overlap_ag and torch.is_grad_enabled()")
    assert [(f["rule"], f["line"], f["relation"]) for f in d["findings"]] == [
        ("GG001", gate, "in the parting function")
    ]
    grad, no_grad = case["forwards"][:2]
    assert [c["name"] for c in grad["collectives"]] == ["all_gather_into_tensor"]
    assert no_grad["collectives"] == []
    assert (grad["aten_ops"], no_grad["aten_ops"]) == (
        {"aten.new_empty": 1, "aten.mm": 1},
        {"aten.repeat": 1, "aten.mm": 1},
    )
    assert (grad["counts"], no_grad["counts"]) == (
        {"collective": 1, "aten": 2, "probe": 0, "module": 0},
        {"collective": 0, "aten": 2, "probe": 0, "module": 0},
    )


def test_collective_skipped_under_no_grad(stock_run):
    _, report = stock_run
    case = _case(report, "case_collective_skipped_under_no_grad")
    src = FAMILIES.read_text().splitlines()
    start = line_of(FAMILIES, "class CollectiveSkippedUnderNoGrad")
    reduce_line = next(i for i in range(start, len(src) + 1) if "dist.all_reduce(y)" in src[i - 1])
    matmul = next(i for i in range(start, len(src) + 1) if "y = x @ self.weight" in src[i - 1])
    assert _partings(case) == [("no_grad", reduce_line, matmul), ("checkpoint/first_forward", reduce_line, matmul)]
    d = case["divergences"][0]
    assert [(e["kind"], e["name"], e["detail"]["async"]) for e in d["expected"]] == [
        ("collective", "all_reduce", False)
    ]
    assert d["found"] == []
    # the static finding on the `if` line is the one the witness sees
    gate = (
        line_of(FAMILIES, "        if torch.is_grad_enabled():\n            dist.all_reduce(y)")
        if False
        else reduce_line - 1
    )
    assert [(f["rule"], f["line"]) for f in d["findings"]] == [("GG001", gate)]


def test_group_chosen_by_grad_mode(stock_run):
    _, report = stock_run
    case = _case(report, "case_group_chosen_by_grad_mode")
    call = line_of(FAMILIES, "dist.all_gather_into_tensor(gathered, x, group=group)")
    assert _partings(case) == [("no_grad", call, call), ("checkpoint/first_forward", call, call)]
    d = case["divergences"][0]
    (primary,), (secondary,) = d["expected"], d["found"]
    assert (primary["name"], secondary["name"]) == ("all_gather_into_tensor", "all_gather_into_tensor")
    assert (primary["detail"]["group_ranks"], primary["detail"]["group_size"]) == (list(range(NPROC)), NPROC)
    assert secondary["detail"]["group_size"] == 1
    assert primary["detail"]["group_name"] != secondary["detail"]["group_name"]
    if NPROC > 1:
        # the recompute gathers over the world again: its output no longer fits the first forward's
        assert case["errors"]["checkpoint"].startswith("the backward (with the recompute) failed: Mismatch in shape")


def test_dropout_off_under_no_grad(stock_run):
    _, report = stock_run
    case = _case(report, "case_dropout_off_under_no_grad")
    dropout = line_of(FAMILIES, "y = F.dropout(y, self.p, training=self.training and torch.is_grad_enabled())")
    relu = line_of(FAMILIES, "return y.relu()")
    assert _partings(case) == [("no_grad", dropout, relu), ("checkpoint/first_forward", dropout, relu)]
    d = case["divergences"][0]
    # on CUDA, dropout is one fused kernel
    fused = BACKEND == "nccl"
    assert [e["name"] for e in d["expected"]] == (
        ["aten.native_dropout"] if fused else ["aten.empty_like", "aten.bernoulli_", "aten.div_", "aten.mul"]
    )
    assert d["found"] == []
    assert [(f["rule"], f["line"], f["relation"]) for f in d["findings"]] == [("GG003", dropout, "on the stack")]


def test_findings_verdicts(stock_run):
    proc, report = stock_run
    src = FAMILIES.read_text().splitlines()
    skipped = next(
        i
        for i in range(line_of(FAMILIES, "class CollectiveSkippedUnderNoGrad"), len(src) + 1)
        if src[i - 1].strip() == "if torch.is_grad_enabled():"
    )
    assert [(f["rule"], f["line"], f["verdict"]) for f in report["findings"]] == [
        ("GG001", line_of(FAMILIES, "ub_overlap_ag = ub_overlap_ag and torch.is_grad_enabled()"), "WITNESSED"),
        ("GG001", skipped, "WITNESSED"),
        ("GG001", line_of(FAMILIES, "group = self.secondary if not forward else self.primary"), "WITNESSED"),
        ("GG003", line_of(FAMILIES, "training=self.training and torch.is_grad_enabled()"), "WITNESSED"),
    ]
    assert report["findings"][0]["witnessed_by"] == [
        "case_overlap_gated_on_grad_mode (no_grad, in the parting function)",
        "case_overlap_gated_on_grad_mode (checkpoint/first_forward, in the parting function)",
    ]
    assert any(line.startswith("WITNESSED     GG001 ") for line in proc.stdout.decode().splitlines())


# -- after gradgate fix ------------------------------------------------------------------
def test_fix_changes_exactly_the_three_gates(fixed_run):
    fix, fixed, _, _ = fixed_run
    assert fix.returncode == 1  # GG003 has no fix: one finding left
    before, after = FAMILIES.read_text(), fixed.read_text()
    expected = (
        before.replace("        ub_overlap_ag = ub_overlap_ag and torch.is_grad_enabled()\n", "")  # x = x: deleted
        .replace(
            "        if torch.is_grad_enabled():\n            dist.all_reduce(y)\n", "        dist.all_reduce(y)\n"
        )
        .replace("group = self.secondary if not forward else self.primary", "group = self.primary")
    )
    assert expected != before and after == expected


def test_fixed_overlap_and_correct_uses_show_no_divergence(fixed_run):
    _, _, _proc, report = fixed_run
    for name in (*BUGGY[:3], *CORRECT):
        case = _case(report, name)
        assert (case["same"], case["divergences"], case["divergences_per_rank"]) == (True, [], [0] * NPROC), name
    forwards = _case(report, "case_overlap_gated_on_grad_mode")["forwards"]
    assert [[c["name"] for c in f["collectives"]] for f in forwards] == [["all_gather_into_tensor"]] * 4


def test_after_the_fix_only_the_report_only_finding_still_diverges(fixed_run):
    """The three GG001 families are fixed and take the same path in every mode; GG003
    (dropout off under no_grad) is report-only, and the witness still sees it."""
    _, _fixed, proc, report = fixed_run
    assert proc.returncode == 1
    for name in (*BUGGY[:3], *CORRECT):
        assert _case(report, name)["same"] is True, name
    assert _case(report, BUGGY[3])["same"] is False
    assert [(f["rule"], f["verdict"]) for f in report["findings"]] == [("GG003", "WITNESSED")]


# -- the library API, in this process -------------------------------------------------------
@pytest.fixture(scope="module")
def one_rank():
    if dist.is_initialized():
        yield
        return
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    yield
    dist.destroy_process_group()


sys.path.insert(0, str(CASES))
import witness_helpers as helpers  # noqa: E402


def test_same_path_for_a_plain_module(one_rank):
    comparison = assert_same_forward_paths(
        helpers.Plain, (torch.randn(3, 4),), modes=("grad", "no_grad", "checkpoint", "checkpoint_non_reentrant")
    )
    assert [f.label for f in comparison.forwards] == [
        "grad",
        "no_grad",
        "checkpoint/first_forward",
        "checkpoint/recompute",
        "checkpoint_non_reentrant/first_forward",
        "checkpoint_non_reentrant/recompute",
    ]
    assert [f.grad_enabled for f in comparison.forwards] == [True, False, False, True, True, True]
    grad = comparison.reference
    assert [e.name for e in grad.events if e.kind != "aten"] == ["linear", "all_reduce"]
    assert [e.name for e in grad.events if e.kind == "aten"] == ["aten.t", "aten.addmm", "aten.gelu"]
    assert comparison.report() == (
        "same forward path in grad, no_grad, checkpoint/first_forward, checkpoint/recompute, "
        "checkpoint_non_reentrant/first_forward, checkpoint_non_reentrant/recompute"
    )


def test_probe_counts_and_probe_divergence(one_rank):
    probe = Probe("witness_helpers:counted_kernel", label="kernel")
    comparison = compare_forwards(helpers.FastPathUnderNoGrad(), torch.ones(2, 4), probes=[probe])
    assert [f.probe_counts() for f in comparison.forwards] == [{}, {"kernel": 1}, {"kernel": 1}, {}]
    (first, _second) = comparison.divergences
    assert (first.other, [e.describe() for e in first.found]) == ("no_grad", ["probe kernel"])
    assert helpers.counted_kernel.__name__ == "counted_kernel" and not hasattr(helpers.counted_kernel, "__wrapped__")
    src = CASES / "witness_helpers.py"
    assert (first.parting.line, first.parting.other_line) == (
        line_of(src, "x = x * 2\n".strip()),
        line_of(src, "x = counted_kernel(x)"),
    )


def test_training_switched_by_grad_mode(one_rank):
    comparison = compare_forwards(helpers.EvalSwitchedByGradMode, (torch.ones(2, 4),), modes=("grad", "no_grad"))
    (d,) = comparison.divergences
    assert ([e.describe() for e in d.expected], [e.describe() for e in d.found]) == (
        ["module inner training=True"],
        ["module inner training=False"],
    )
    call = line_of(CASES / "witness_helpers.py", "return self.inner(x)")
    assert (d.parting.line, d.parting.other_line) == (call, call)


def test_assert_fails_with_a_readable_diff(one_rank):
    with pytest.raises(ForwardPathsDiffer) as info:
        assert_same_forward_paths(helpers.AsyncReduce(), (torch.ones(2, 4),), modes=("grad", "no_grad"), aten=False)
    call = line_of(CASES / "witness_helpers.py", "work = dist.all_reduce(y, async_op=torch.is_grad_enabled())")
    path = str(CASES / "witness_helpers.py")
    assert str(info.value) == (
        "1 divergence(s) from grad (grad, no_grad):\n"
        "grad vs no_grad:\n"
        f"  paths part at {path}:{call} in AsyncReduce.forward\n"
        f"  - collective all_reduce group [0] (size 1, name '0') async shapes [[2, 4]]  @ {path}:{call}\n"
        f"  + collective all_reduce group [0] (size 1, name '0') sync shapes [[2, 4]]  @ {path}:{call}\n"
        f"  static finding GG001 at {path}:{call}:44 (on the stack): option `async_op=` of a forward "
        "collective is gated on grad mode (`torch.is_grad_enabled()`): under torch.no_grad() the collective "
        "runs differently"
    )
    assert [f.rule for f in info.value.comparison.divergences[0].findings] == ["GG001"]


def test_sees_what_commdebugmode_counts(one_rank):
    """PyTorch's CommDebugMode counts the same c10d ops: plain torch.distributed calls included."""
    from torch.distributed.tensor.debug import CommDebugMode

    module = helpers.ThreeCollectives()
    with CommDebugMode() as counting:
        module(torch.ones(2, 4))
    comparison = compare_forwards(module, (torch.ones(2, 4),), modes=("grad",))
    seen = comparison.reference.collectives()
    assert [(e.name, e.info["op"], e.detail["async"]) for e in seen] == [
        ("all_gather_into_tensor", "c10d._allgather_base_", False),
        ("all_reduce", "c10d.allreduce_", False),
        ("all_reduce", "_c10d_functional.all_reduce", True),
    ]
    assert counting.get_total_counts() == len(seen) == 3


def test_unknown_mode_is_an_error(one_rank):
    with pytest.raises(ValueError, match=r"unknown modes \['eval'\]"):
        compare_forwards(helpers.Plain(), (torch.ones(2, 4),), modes=("grad", "eval"))


DOC_EXAMPLE = """
import torch
import torch.distributed as dist
from torch import nn

pytest_plugins = ["gradgate.witness.pytest_plugin"]


class Gated(nn.Module):
    def forward(self, x):
        if torch.is_grad_enabled():
            dist.all_reduce(x)
        return x * 2


class Fine(nn.Module):
    def forward(self, x):
        dist.all_reduce(x)
        return x * 2


def test_fine(single_rank_group, same_forward_paths):
    same_forward_paths(Fine, (torch.ones(2),))


def test_gated(single_rank_group, same_forward_paths):
    same_forward_paths(Gated, (torch.ones(2),))
"""


def test_pytest_plugin(tmp_path):
    (tmp_path / "test_paths.py").write_text(DOC_EXAMPLE)
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_paths.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 1, proc.stdout[-3000:]
    assert "1 failed, 1 passed" in proc.stdout
    assert (
        "ForwardPathsDiffer: 2 divergence(s) from grad (grad, no_grad, checkpoint/first_forward, checkpoint/recompute):"
    ) in proc.stdout
    assert f"paths part at {tmp_path / 'test_paths.py'}:12 in Gated.forward (no_grad: line 13)" in proc.stdout
    assert "+ (nothing: no_grad skips these steps)" in proc.stdout
