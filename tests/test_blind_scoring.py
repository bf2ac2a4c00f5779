"""The blind-round scorer (``eval/blind.py``): a finding on a BUG label is found whatever
its rule, any other finding is a false positive once a line, packages are the labels in
a folder of the round; and it runs gradgate on a round's cases as a user would."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("blind", ROOT / "eval" / "blind.py")
assert _spec is not None and _spec.loader is not None
blind = importlib.util.module_from_spec(_spec)
sys.modules["blind"] = blind
_spec.loader.exec_module(blind)


def test_score_counts_found_missed_and_false_positives_by_part_and_kind():
    labels = [
        blind.Label("a.py", 3, "BUG", "comm", "x"),
        blind.Label("a.py", 7, "OK", "trap", "y"),
        blind.Label("pkg/b.py", 2, "BUG", "numerics", "z"),
    ]
    findings = [("a.py", 3, "GG003"), ("a.py", 3, "GG001"), ("a.py", 7, "GG001"), ("pkg/b.py", 9, "GG001")]
    result = blind.score(labels, findings)
    assert (result.all.bugs, result.all.found, result.all.false_positives) == (2, 1, 2)
    assert (result.single.found, result.single.false_positives) == (1, 1)
    assert (result.packages.bugs, result.packages.found, result.packages.false_positives) == (1, 0, 1)
    assert [m.path for m in result.missed] == ["pkg/b.py"]
    assert result.false_positives == [("a.py", 7, "GG001", "trap"), ("pkg/b.py", 9, "GG001", "unlabelled")]
    assert result.by_kind["comm"].recall == 1.0 and result.by_kind["numerics"].recall == 0.0


def test_a_round_is_scored_end_to_end(tmp_path):
    cases = tmp_path / "round" / "cases"
    cases.mkdir(parents=True)
    (cases / "c.py").write_text(
        "import torch\nimport torch.distributed as dist\n\n\n"
        "def f(x):\n    if torch.is_grad_enabled():\n        dist.all_reduce(x, async_op=True)\n"
        "    else:\n        dist.all_reduce(x)\n    return x\n",
        encoding="utf-8",
    )
    (tmp_path / "round" / "labels.csv").write_text(
        "path,line,label,kind,source,reason,origin\nc.py,6,BUG,comm,if torch.is_grad_enabled():,r,o\n",
        encoding="utf-8",
    )
    assert blind.main([str(tmp_path / "round")]) == 0
