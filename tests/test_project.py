"""The project (issue 15): names resolved across modules, a parameter's effects followed
through calls into other files, the path shown, and a cached run that re-analyses only
the file that changed and the files whose findings rest on it."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

import gradgate.engine as engine
import gradgate.model.project as project_module
from gradgate.config import Config
from gradgate.model.project import Project, module_name
from gradgate.model.values import FunctionRef
from gradgate.runner import RunOptions, run

COMM = """\
import torch.distributed as dist


def reduce(x, group, secondary, forward=True):
    pg = group
    if secondary is not None and not forward:
        pg = secondary
    dist.all_reduce(x, group=pg)
"""

CALLER = """\
import torch

from pkg.comm import reduce


def fetch(x, g1, g2):
    prev = torch.is_grad_enabled()
    reduce(x, g1, g2, forward=prev)


def backward_step(x, g1, g2):
    reduce(x, g1, g2, forward=False)
"""

UNRELATED = """\
import torch


def keep(x):
    if torch.is_grad_enabled():
        x.requires_grad_()
    return x
"""


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))


@pytest.fixture
def package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    _write(
        tmp_path,
        {"pkg/__init__.py": "", "pkg/comm.py": COMM, "pkg/a.py": CALLER, "pkg/b.py": UNRELATED, "pkg/c.py": "X = 1\n"},
    )
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_module_names_follow_the_packages(package: Path):
    assert module_name("pkg/comm.py") == ("pkg.comm", "pkg", str(package))
    assert module_name("pkg/__init__.py") == ("pkg", "pkg", str(package))


def test_grad_mode_passed_on_is_reported_at_the_callees_deciding_predicate_with_its_path(package: Path):
    """Grad mode itself passed to another module's function is reported where that
    function decides (issue 27): the read of its parameter in the predicate, with the
    capture and the call as the flow; report only (the predicate serves every caller)."""
    findings = [f for r in run(["pkg"], Config(), RunOptions()) for f in r.findings]
    assert [(f.path, f.line, f.column, f.end_column, f.rule) for f in findings] == [("pkg/comm.py", 6, 38, 45, "GG001")]
    (finding,) = findings
    assert finding.applicability is None
    assert finding.source_line == "    if secondary is not None and not forward:"
    assert [(s.path, s.line, s.column, s.message) for s in finding.flow] == [
        ("pkg/a.py", 7, 12, "grad mode captured: `torch.is_grad_enabled()`"),
        ("pkg/a.py", 7, 5, "grad mode held in `prev`"),
        ("pkg/a.py", 8, 5, "grad mode passed as `forward` to `reduce`"),
        ("pkg/comm.py", 6, 38, "decides `group` here (the process group of a forward collective)"),
    ]


def test_grad_mode_combined_before_a_call_into_another_module_is_reported_at_the_callees_predicate(package: Path):
    """``reduce(..., forward=prev and x.is_cuda)``: what grad mode decides is handed to
    another module, whose predicate decides (issue 27: a cross-module finding is reported
    at the deciding predicate), with the combining call in its flow; report only."""
    caller = (package / "pkg/a.py").read_text().replace("forward=prev)", "forward=prev and x.is_cuda)")
    (package / "pkg/a.py").write_text(caller)
    findings = [f for r in run(["pkg"], Config(), RunOptions()) for f in r.findings]
    assert [(f.path, f.line, f.column, f.rule, f.applicability) for f in findings] == [
        ("pkg/comm.py", 6, 38, "GG001", None)
    ]
    assert [(s.path, s.line) for s in findings[0].flow] == [
        ("pkg/a.py", 7),
        ("pkg/a.py", 7),
        ("pkg/a.py", 8),
        ("pkg/comm.py", 6),
    ]


def _counting(monkeypatch: pytest.MonkeyPatch) -> tuple[list[str], list[str]]:
    """(files analysed, files the project parsed for summaries), filled as a run goes."""
    analysed: list[str] = []
    parsed: list[str] = []
    real_analysis, real_read = engine._Analysis.__init__, project_module.Project._read

    def analysis(self, path, *args, **kwargs):
        analysed.append(path)
        real_analysis(self, path, *args, **kwargs)

    def read(self, name, path):
        found = real_read(self, name, path)
        if found is not None:
            parsed.append(Path(path).name)
        return found

    monkeypatch.setattr(engine._Analysis, "__init__", analysis)
    monkeypatch.setattr(project_module.Project, "_read", read)
    return analysed, parsed


def test_a_change_reanalyses_the_file_and_its_dependants_only(package: Path, monkeypatch: pytest.MonkeyPatch):
    import gradgate.runner as runner

    analysed, parsed = _counting(monkeypatch)
    options = RunOptions(cache_dir=str(package / "cache"))

    def check() -> list[tuple[str, int]]:
        runner._PROJECTS.clear()  # each run is a new process
        analysed.clear()
        parsed.clear()
        return [(f.path, f.line) for r in run(["pkg"], Config(), options) for f in r.findings]

    assert check() == [("pkg/comm.py", 6)]
    assert (sorted(analysed), parsed) == (["pkg/a.py", "pkg/b.py"], ["comm.py"])
    assert check() == [("pkg/comm.py", 6)]
    assert (analysed, parsed) == ([], [])  # a warm run parses nothing
    # the callee stops choosing the group by `forward`: the caller's finding goes
    (package / "pkg/comm.py").write_text(COMM.replace("secondary is not None and not forward", "secondary is not None"))
    assert check() == []
    assert (analysed, parsed) == (["pkg/a.py"], ["comm.py"])
    # a file nothing rests on: itself alone
    (package / "pkg/b.py").write_text(UNRELATED + "\n# touched\n")
    assert check() == []
    assert (analysed, parsed) == (["pkg/b.py"], [])


def test_a_function_returning_grad_mode_brings_in_a_file_without_a_grad_token(package: Path):
    _write(
        package,
        {
            "pkg/state.py": "import torch\n\n\ndef grad_on():\n    return torch.is_grad_enabled()\n",
            "pkg/layer.py": "from .state import grad_on\n\n\ndef f(x, overlap_comm):\n"
            "    overlap_comm = overlap_comm and grad_on()\n    return overlap_comm\n",
        },
    )
    findings = [f for r in run(["pkg/layer.py", "pkg/state.py"], Config(), RunOptions()) for f in r.findings]
    assert [(f.path, f.line, f.column, f.rule) for f in findings] == [("pkg/layer.py", 5, 37, "GG001")]
    assert findings[0].message.startswith(
        "forward communication flag `overlap_comm` is gated on grad mode (`grad_on()`)"
    )
    assert findings[0].applicability is not None  # the call is a read of grad mode: removed like one


def test_methods_resolve_through_attributes_factories_and_bases(package: Path):
    _write(
        package,
        {
            "pkg/base.py": "class Base:\n    def fetch(self, x, forward):\n        pass\n",
            "pkg/coord.py": "from .base import Base\n\n\nclass Coordinator(Base):\n    pass\n\n\n"
            "def make():\n    return Coordinator()\n",
            "pkg/__init__.py": "from .coord import Coordinator\n",
        },
    )
    project = Project(Config(), ["pkg/a.py"])
    # re-exported by the package, found by class
    callee = project.callee(FunctionRef("fetch", external=True, receiver="pkg.Coordinator"))
    assert callee is not None and (callee.module.name, callee.qualname, callee.skip) == ("pkg.base", "Base.fetch", 1)
    # what a factory returns
    callee = project.callee(FunctionRef("fetch", external=True, receiver="pkg.coord.make"))
    assert callee is not None and callee.qualname == "Base.fetch"
    # never by a bare method name
    assert project.callee(FunctionRef("fetch", external=True, receiver="pkg.coord.unknown")) is None


def test_effects_do_not_depend_on_which_file_asked_first(package: Path):
    """Two functions calling each other: what one's parameter decides is the same
    whether the other's effects were asked for first or not."""
    _write(
        package,
        {
            "pkg/ping.py": "import torch.distributed as dist\nfrom pkg import pong\n\n\n"
            "def ping(x, forward, n):\n    if n:\n        pong.pong(x, forward, n)\n"
            "    dist.all_reduce(x, async_op=forward)\n",
            "pkg/pong.py": "from pkg import ping\n\n\ndef pong(x, forward, n):\n    ping.ping(x, forward, n - 1)\n",
        },
    )

    def effects(order: list[str]) -> dict[str, list[tuple[str, int]]]:
        project = Project(Config(), ["pkg/ping.py"])
        out = {}
        for name in order:
            callee = project.callee(FunctionRef(f"pkg.{name}.{name}", external=True))
            assert callee is not None
            out[name] = sorted((e.kind, e.steps[-1].line) for e in project.effects(callee, "forward"))
        return out

    assert effects(["ping", "pong"]) == effects(["pong", "ping"])
    assert effects(["pong"])["pong"] == [("comm-option", 8)]


def test_json_output_carries_the_path_across_files(package: Path):
    from conftest import invoke

    ran = invoke(["check", "--no-cache", "--format", "json", "pkg"])
    assert ran.exit_code == 1
    (finding,) = json.loads(ran.output)
    assert [(s["path"], s["line"]) for s in finding["flow"]] == [
        ("pkg/a.py", 7),
        ("pkg/a.py", 7),
        ("pkg/a.py", 8),
        ("pkg/comm.py", 6),
    ]


def test_a_project_keeps_a_bounded_source_of_parsed_modules(package: Path, monkeypatch: pytest.MonkeyPatch):
    """Beyond KEEP_BYTES of source, the least recently used modules are dropped (with
    what was worked out from them) and parsed again when asked: the findings are the
    same, with every file analysed (--no-prefilter) and a budget of one byte."""
    import gradgate.runner as runner

    def findings() -> list[tuple[str, int, str]]:
        runner._PROJECTS.clear()
        results = run(["pkg"], Config(), RunOptions(jobs=1, prefilter=False))
        return [(f.path, f.line, f.message) for r in results for f in r.findings]

    everything = findings()
    assert [(path, line) for path, line, _ in everything] == [("pkg/comm.py", 6)]
    (project,) = runner._PROJECTS.values()
    assert len(project._kept) == 5  # every file of the package, parsed once
    monkeypatch.setattr(project_module, "KEEP_BYTES", 1)
    analysed, parsed = _counting(monkeypatch)
    assert findings() == everything
    assert sorted(analysed) == ["pkg/__init__.py", "pkg/a.py", "pkg/b.py", "pkg/c.py", "pkg/comm.py"]
    (project,) = runner._PROJECTS.values()
    assert len(project._kept) == 1  # the module analysed last, no other
    assert parsed == ["comm.py"]  # a.py's question, after b.py's analysis dropped it
