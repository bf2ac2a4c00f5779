"""The witness's torch-free half: divergences and parting frames, case files, verdicts and
the `gradgate witness` command line (no torch needed; the torch half is test_witness_torch.py)."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import pytest
from conftest import invoke

from gradgate.witness import cli as witness_cli
from gradgate.witness.cases import CasesError, load_cases
from gradgate.witness.diff import Parting, divergences, parting, render
from gradgate.witness.events import Event, Forward, Frame
from gradgate.witness.report import case_verdict, exit_code, summary_line


def _ev(kind: str, name: str, *lines: int, detail: dict | None = None) -> Event:
    frames = (
        Frame("/t/test.py", 5, "test", 1),
        *tuple(Frame("/m/mod.py", line, "M.forward", 10) for line in lines[:1]),
        *tuple(Frame("/m/mod.py", line, "helper", 40) for line in lines[1:]),
    )
    return Event(kind, name, detail or {}, frames)


def _fwd(label: str, events: list[Event], training: bool = True) -> Forward:
    return Forward(label, label, "forward", label == "grad", training, events)


def test_replace_block_parts_at_the_branch():
    ref = _fwd("grad", [_ev("aten", "aten.mm", 11), _ev("collective", "all_gather", 13), _ev("aten", "aten.add", 16)])
    other = _fwd("no_grad", [_ev("aten", "aten.mm", 11), _ev("aten", "aten.repeat", 15), _ev("aten", "aten.add", 16)])
    (d,) = divergences(ref, other)
    assert (d.kind, d.index, [e.name for e in d.expected], [e.name for e in d.found]) == (
        "path",
        1,
        ["all_gather"],
        ["aten.repeat"],
    )
    assert d.parting == Parting("/m/mod.py", "M.forward", 10, 13, 15)
    assert render(d) == (
        "grad vs no_grad:\n"
        "  paths part at /m/mod.py:13 in M.forward (no_grad: line 15)\n"
        "  - collective all_gather group [] (size None, name None) async unknown shapes []  @ /m/mod.py:13\n"
        "  + aten aten.repeat  @ /m/mod.py:15"
    )


def test_skipped_steps_anchor_on_the_next_event_or_the_last():
    ref = _fwd("grad", [_ev("aten", "aten.mm", 11), _ev("collective", "all_reduce", 12)])
    other = _fwd("no_grad", [_ev("aten", "aten.mm", 11)])
    (d,) = divergences(ref, other)
    assert (d.found, d.parting.line, d.parting.other_line) == ((), 12, 11)
    assert render(d).endswith("  + (nothing: no_grad skips these steps)")


def test_same_line_different_detail_and_deeper_frames():
    a = _ev("collective", "all_gather", 20, 44, detail={"group_size": 2})
    b = _ev("collective", "all_gather", 20, 44, detail={"group_size": 1})
    (d,) = divergences(_fwd("grad", [a]), _fwd("no_grad", [b]))
    assert (d.parting.function, d.parting.line, d.parting.other_line) == ("helper", 44, 44)
    # frames that differ below a common call line part at that line
    c = Event("aten", "x", {}, (Frame("/m/mod.py", 20, "M.forward", 10), Frame("/m/a.py", 3, "fast", 1)))
    e = Event("aten", "x", {}, (Frame("/m/mod.py", 20, "M.forward", 10), Frame("/m/b.py", 7, "slow", 1)))
    assert parting(c, e) == Parting("/m/mod.py", "M.forward", 10, 20, 20)
    assert parting(None, None) is None


def test_training_and_equal_forwards():
    ref = _fwd("grad", [_ev("aten", "aten.mm", 11)])
    assert divergences(ref, _fwd("no_grad", [_ev("aten", "aten.mm", 11)])) == []
    (d,) = divergences(ref, _fwd("no_grad", [_ev("aten", "aten.mm", 11)], training=False))
    assert (d.kind, render(d)) == ("training", "grad vs no_grad:\n  module.training differs (grad and no_grad)")


def test_event_signature_ignores_stack_and_info():
    a = Event("collective", "all_reduce", {"shapes": [[2, 4]]}, (Frame("/a", 1, "f", 1),), {"op": "x"})
    b = Event("collective", "all_reduce", {"shapes": ((2, 4),)}, (), {"op": "y"})
    assert a.signature() == b.signature() == ("collective", "all_reduce", (("shapes", ((2, 4),)),))
    assert Event.from_dict(a.as_dict()) == a


def test_load_cases(tmp_path):
    path = tmp_path / "cases.py"
    path.write_text(
        "from os import path as case_imported\n"
        "def case_b():\n    return 2\n"
        "def case():\n    return 1\n"
        "def helper():\n    return 0\n"
        "case_value = 3\n"
    )
    assert [(c.name, c.line, c.function()) for c in load_cases(path)] == [("case_b", 2, 2), ("case", 4, 1)]
    assert [c.name for c in load_cases(path, ("case",))] == ["case"]
    with pytest.raises(CasesError, match="no case case_c"):
        load_cases(path, ("case_c",))
    (tmp_path / "empty.py").write_text("x = 1\n")
    with pytest.raises(CasesError, match=r"no function named `case` or `case_\*`"):
        load_cases(tmp_path / "empty.py")


def test_case_verdicts():
    same = {
        "name": "a",
        "same": True,
        "divergences": [],
        "divergences_per_rank": [0, 0],
        "forwards": [{"label": "grad"}, {"label": "no_grad"}],
    }
    assert case_verdict(same) == ("SAME", "same forward path in grad, no_grad")
    diverging = {
        "name": "b",
        "same": False,
        "divergences_per_rank": [1, 0],
        "errors": {},
        "divergences": [{"kind": "path", "other": "no_grad", "parting": {"path": "m.py", "line": 3, "other_line": 5}}],
    }
    assert case_verdict(diverging) == (
        "DIVERGES",
        "1 divergence(s) on rank(s) [0]; no_grad: paths part at m.py:3 (no_grad: line 5)",
    )
    # a divergence on another rank only is still a divergence
    other_rank = {**same, "divergences_per_rank": [0, 2]}
    assert case_verdict(other_rank)[0] == "DIVERGES"
    assert case_verdict({"name": "c", "divergences_per_rank": [0, -1]}) == ("ERROR", "failed on rank(s) [1]")
    assert case_verdict({"name": "d", "error": "RuntimeError: no group"}) == ("ERROR", "RuntimeError: no group")
    failed_backward = {**same, "same": False, "errors": {"checkpoint": "the backward (with the recompute) failed: x"}}
    assert case_verdict(failed_backward) == (
        "DIVERGES",
        "0 divergence(s); checkpoint: the backward (with the recompute) failed: x",
    )
    report = {"cases": [same, diverging], "findings": []}
    assert (summary_line(report), exit_code(report)) == ("1 SAME, 1 DIVERGES; 0 of 0 finding(s) witnessed", 1)
    assert exit_code({"cases": [same]}) == 0
    assert exit_code({"cases": [same], "run_errors": ["torchrun exited with code 1"]}) == 1


def test_witness_is_a_subcommand_and_dry_runs(tmp_path):
    cases = tmp_path / "cases.py"
    cases.write_text("def case():\n    pass\n")
    assert "witness" in invoke(["--help"]).output
    result = invoke(
        [
            "witness",
            str(cases),
            "--backend",
            "gloo",
            "--modes",
            "grad,checkpoint_non_reentrant",
            "--probe",
            "m:f",
            "--dry-run",
        ],
    )
    assert result.exit_code == 0, result.output
    argv = shlex.split(result.output)
    assert argv[:7] == [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nnodes=1",
        "--nproc-per-node=2",
        "-m",
    ]
    assert argv[7:9] == ["gradgate.witness", str(cases.resolve())]
    assert argv[argv.index("--backend") + 1] == "gloo"
    assert argv[argv.index("--modes") + 1] == "grad,checkpoint_non_reentrant"
    assert argv[argv.index("--probe") + 1] == "m:f"
    bad = invoke(["witness", str(cases), "--modes", "grad,eval", "--dry-run"])
    assert bad.exit_code == 2 and "unknown mode(s) eval" in bad.output
    assert witness_cli.MODE_NAMES == ("grad", "no_grad", "checkpoint", "checkpoint_non_reentrant")


def test_mode_names_agree_with_the_rank_side():
    torch = pytest.importorskip("torch")
    del torch
    from gradgate.witness.modes import MODES

    assert MODES == witness_cli.MODE_NAMES


def test_cases_file_must_exist(tmp_path):
    result = invoke(["witness", str(Path(tmp_path) / "missing.py")])
    assert result.exit_code == 2 and "does not exist" in result.output
