"""What the model makes of a module, as text: each function's decisions, how grad mode
acts on each, and the reads a finding would be reported at. For model tests
(``tests/model/*.test``) and for a developer asking why something is or is not found:

    python -m gradgate.model.describe FILE.py

One line a decision::

    fwd: comm `dist.all_reduce` [async_op=True] line 6: gated (reads 5:7)

``gated``: turning grad mode off forces it off (or, for a choice, changes it): a
finding; ``opposite``: grad mode on forces it off (correct); ``free``: grad mode takes
no part (a decision on a parameter only, kept for summaries).
"""

from __future__ import annotations

import ast
import sys

from ..config import Config
from .analysis import ModuleAnalysis, opens_without_grad
from .decisions import kind_of
from .interpret import CommEffect, Decision, effect_form
from .project import Project


def describe(
    text: str, config: Config | None = None, path: str = "<module>", project: Project | None = None
) -> list[str]:
    """The lines describing the decisions of the module ``text``, sorted by place
    (``project``: the modules it may call, for a ``path`` on disk)."""
    analysis = ModuleAnalysis(ast.parse(text), config or Config(), text, project, path)
    bdd = analysis.bdd
    lines: list[tuple[tuple[int, int, str], str]] = []
    for decision in analysis.decisions:
        if kind_of(decision.kind).any_way:
            on, off = bdd.grad_on(decision.bdd), bdd.grad_off(decision.bdd)
            verdict = "free" if on == off else "opposite" if opens_without_grad(decision, on, off) else "gated"
        elif bdd.forced_off_by_no_grad(decision.bdd):
            verdict = "gated"
        elif bdd.forced_off_by_grad(decision.bdd):
            verdict = "opposite"
        else:
            verdict = "free"
        reads = sorted({(e.origin.lineno, e.origin.col_offset + 1) for e in analysis.entries(decision)})  # type: ignore[attr-defined]
        where = ", ".join(f"{line}:{column}" for line, column in reads)
        text_line = (
            f"{decision.function}: {decision.kind} `{decision.name}`{_effect(decision)} "
            f"line {getattr(decision.node, 'lineno', 0)}: {verdict}" + (f" (reads {where})" if where else "")
        )
        lines.append(
            ((getattr(decision.node, "lineno", 0), getattr(decision.node, "col_offset", 0), text_line), text_line)
        )
    return [t for _, t in sorted(set(lines))]


def _effect(decision: Decision) -> str:
    """A communication decision's effect: the operations it reaches and its form."""
    key = decision.key
    effect = key[1] if len(key) > 1 and isinstance(key[1], CommEffect) else None
    if effect is None:
        return ""
    form = effect_form(effect)
    ops = "/".join(sorted(effect.ops))
    return f" [{ops}{': ' + form if form != 'this form' else ''}]"


def main(argv: list[str] | None = None) -> int:
    paths = sys.argv[1:] if argv is None else argv
    config = Config()
    for path in paths:
        with open(path, encoding="utf-8") as handle:
            for line in describe(handle.read(), config, path, Project(config, [path])):
                print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
