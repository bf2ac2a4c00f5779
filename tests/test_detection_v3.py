"""Issue 27's engine changes where a model case cannot show them: a helper whose returned
condition is too large to join does not stop the run, and issue 29's first item: a safe
fix changes the gated decision and nothing else the ``if`` does."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path


def _gradgate(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gradgate", *args], cwd=cwd, capture_output=True, text=True)


def test_a_helper_with_many_returns_is_analysed_without_joining_them(tmp_path: Path):
    ladder = "".join(f"    if c{i}:\n        return x{i} and torch.is_grad_enabled()\n" for i in range(40))
    params = ", ".join([*(f"c{i}" for i in range(40)), *(f"x{i}" for i in range(40))])
    (tmp_path / "m.py").write_text(
        "import torch\nimport torch.distributed as dist\n\n\n"
        f"def decide({params}):\n{ladder}    return False\n\n\n"
        "def fwd(x, ub_overlap_ag):\n    ub_overlap_ag = ub_overlap_ag and torch.is_grad_enabled()\n    return x\n",
        encoding="utf-8",
    )
    done = _gradgate("check", "--no-cache", "--no-prefilter", "--format", "json", "m.py", cwd=tmp_path)
    assert (done.returncode, done.stderr) == (1, "")
    assert [(f["line"], f["rule"]) for f in json.loads(done.stdout)] == [(90, "GG001")]


def test_a_safe_fix_does_not_drop_what_else_the_if_does(tmp_path: Path):
    sources = {
        "disable.py": "import torch\ndef f(use_async_comm, cache):\n    if not torch.is_grad_enabled():\n"
        "        use_async_comm = False\n        cache.clear()\n    return use_async_comm\n",
        "branches.py": "import torch\ndef f(x, saved, ub_overlap_ag):\n    if torch.is_grad_enabled():\n"
        "        flag = ub_overlap_ag\n        saved.append(x)\n    else:\n        flag = False\n"
        "    ub_overlap_ag = flag\n    return ub_overlap_ag\n",
        "plain.py": "import torch\ndef f(use_async_comm):\n    if not torch.is_grad_enabled():\n"
        "        use_async_comm = False\n    return use_async_comm\n",
    }
    for name, text in sources.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    checked = _gradgate("check", "--no-cache", "--format", "json", ".", cwd=tmp_path)
    fixable = {(f["path"].removeprefix("./"), f["line"], f["fixable"]) for f in json.loads(checked.stdout)}
    assert fixable == {("disable.py", 3, False), ("branches.py", 3, False), ("plain.py", 3, True)}
    fixed = _gradgate("fix", "--no-cache", ".", cwd=tmp_path)
    assert fixed.returncode == 1  # findings left: the two report-only ones
    assert (tmp_path / "disable.py").read_text() == sources["disable.py"]
    assert (tmp_path / "branches.py").read_text() == sources["branches.py"]
    assert (tmp_path / "plain.py").read_text() == "import torch\ndef f(use_async_comm):\n    return use_async_comm\n"
