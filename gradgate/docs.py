"""Generate ``docs/rules/<CODE>.md`` from each rule's docstring and cases.

    python -m gradgate.docs [DOCS_DIR]      # default: docs/rules

The test-suite checks that the committed pages equal what this prints, so the docs
can't drift from the rules.
"""

from __future__ import annotations

import os
import sys


def render(rule) -> str:
    lines = [
        f"# {rule.CODE}: {rule.NAME}",
        "",
        f"*{rule.MESSAGE}*",
        "",
        rule.documentation(),
        "",
        "## Cases the rule is tested on",
        "",
        f"{len(rule.VALID)} valid and {len(rule.INVALID)} invalid cases live in the rule's",
        "`VALID` / `INVALID` lists; `gradgate explain " + rule.CODE + "` prints this page's text.",
        "",
    ]
    return "\n".join(lines)


def write_all(directory: str) -> list[str]:
    from .rule import all_rules

    os.makedirs(directory, exist_ok=True)
    written = []
    for rule in all_rules():
        path = os.path.join(directory, f"{rule.CODE}.md")
        with open(path, "w", encoding="utf-8", newline="\n") as handle:
            handle.write(render(rule))
        written.append(path)
    return written


if __name__ == "__main__":
    for written in write_all(sys.argv[1] if len(sys.argv) > 1 else os.path.join("docs", "rules")):
        print(written)
