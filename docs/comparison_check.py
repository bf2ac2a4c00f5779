"""Checks every row of docs/comparison.md by running the tools: gradgate (this checkout),
ruff, Fixit and semgrep, each given as a command (defaults: on PATH).

    python docs/comparison_check.py --ruff RUFF --fixit FIXIT --semgrep SEMGREP

Prints the table (yes / no per tool and row) with the tools' versions; a row's cell is
what the command observed, never a recollection. Needs no network (semgrep's registry is
not used: its rows are about semgrep itself).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BUG = (
    "import torch\n\ndef f(ub_overlap_ag, x):\n"
    "    ub_overlap_ag = ub_overlap_ag and torch.is_grad_enabled() and x\n    return ub_overlap_ag\n"
)


def run(cmd: list[str], cwd: Path, stdin: str = "") -> subprocess.CompletedProcess:
    import re

    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "NO_COLOR": "1",
        "SEMGREP_SEND_METRICS": "off",
        "PAGER": "cat",
        "MANPAGER": "cat",
    }
    out = subprocess.run(cmd, cwd=cwd, input=stdin, capture_output=True, text=True, env=env, timeout=300)
    # semgrep prints its help as a man page: bold is "c\bc" overstrike
    out.stdout = re.sub(".\x08", "", out.stdout)
    return out


def helps(cmd: list[str], cwd: Path, *needles: str) -> bool:
    out = run(cmd, cwd)
    text = out.stdout + out.stderr
    return out.returncode == 0 and all(n in text for n in needles)


def checks(tools: dict[str, list[str]], work: Path) -> dict[str, dict[str, bool]]:
    g, r, f, s = tools["gradgate"], tools["ruff"], tools["fixit"], tools["semgrep"]
    (work / "m.py").write_text(BUG)
    rows: dict[str, dict[str, bool]] = {}

    def row(name: str, **cells: bool) -> None:
        rows[name] = cells

    finds = {
        "gradgate": "GG001" in run([*g, "check", "m.py"], work).stdout,
        "ruff": "grad"
        in " ".join(
            d["message"]
            for d in json.loads(
                run([*r, "check", "--no-cache", "--select", "ALL", "--output-format", "json", "m.py"], work).stdout
            )
        ).lower(),
        "fixit": "grad" in run([*f, "lint", "m.py"], work).stdout.lower(),
    }
    row("a rule for grad-mode gated forward decisions (TE #2902), built in", **finds)
    row(
        "autofix",
        gradgate=helps([*g, "fix", "--help"], work),
        ruff=helps([*r, "check", "--help"], work, "--fix"),
        fixit=helps([*f, "fix", "--help"], work),
        semgrep=helps([*s, "scan", "--help"], work, "--autofix"),
    )
    row(
        "fix safety levels (`--unsafe-fixes`)",
        gradgate=helps([*g, "fix", "--help"], work, "--unsafe-fixes"),
        ruff=helps([*r, "check", "--help"], work, "--unsafe-fixes"),
        fixit="unsafe" in run([*f, "fix", "--help"], work).stdout,
        semgrep="unsafe" in run([*s, "scan", "--help"], work).stdout,
    )
    row(
        "diff of the fixes, nothing written",
        gradgate=helps([*g, "fix", "--help"], work, "--diff"),
        ruff=helps([*r, "check", "--help"], work, "--diff"),
        fixit=helps([*f, "fix", "--help"], work, "--diff"),
        semgrep=helps([*s, "scan", "--help"], work, "--dryrun"),
    )
    row(
        "standard input checked as a named file",
        gradgate="m.py:4" in run([*g, "check", "--stdin-filename", "m.py", "-"], work, BUG).stdout,
        ruff=helps([*r, "check", "--help"], work, "--stdin-filename"),
        fixit=helps([*f, "lint", "--help"], work, "STDIN"),
        semgrep="stdin" in run([*s, "scan", "--help"], work).stdout.lower(),
    )
    row(
        "language server",
        gradgate=helps([*g, "server", "--help"], work),
        ruff=helps([*r, "server", "--help"], work),
        fixit=helps([*f, "lsp", "--help"], work),
        semgrep=helps([*s, "lsp", "--help"], work),
    )
    row(
        "SARIF output",
        gradgate=helps([*g, "check", "--help"], work, "sarif"),
        ruff=helps([*r, "check", "--help"], work, "sarif"),
        fixit="sarif" in run([*f, "--help"], work).stdout,
        semgrep=helps([*s, "scan", "--help"], work, "--sarif"),
    )
    row(
        "JUnit XML output",
        gradgate=helps([*g, "check", "--help"], work, "junit"),
        ruff=helps([*r, "check", "--help"], work, "junit"),
        fixit="junit" in run([*f, "--help"], work).stdout,
        semgrep=helps([*s, "scan", "--help"], work, "--junit-xml"),
    )
    row(
        "GitLab Code Quality output",
        gradgate=helps([*g, "check", "--help"], work, "gitlab"),
        ruff=helps([*r, "check", "--help"], work, "gitlab"),
        fixit="gitlab" in run([*f, "--help"], work).stdout,
        # semgrep's --gitlab-sast is GitLab's SAST report, not Code Quality
        semgrep="code quality" in run([*s, "scan", "--help"], work).stdout.lower(),
    )
    row(
        "GitHub workflow annotations",
        gradgate=helps([*g, "check", "--help"], work, "github"),
        ruff=helps([*r, "check", "--help"], work, "github"),
        fixit="github" in run([*f, "--help"], work).stdout,
        semgrep="--github" in run([*s, "scan", "--help"], work).stdout,
    )
    row(
        "writes suppressions for the current findings (`--add-noqa`)",
        gradgate=helps([*g, "check", "--help"], work, "--add-noqa"),
        ruff=helps([*r, "check", "--help"], work, "--add-noqa"),
        fixit="noqa" in run([*f, "lint", "--help"], work).stdout or "suppress" in run([*f, "--help"], work).stdout,
        semgrep="noqa" in run([*s, "scan", "--help"], work).stdout,
    )
    row(
        "baseline: only new findings fail",
        gradgate=helps([*g, "check", "--help"], work, "--baseline"),
        ruff="baseline" in run([*r, "check", "--help"], work).stdout,
        fixit="baseline" in run([*f, "--help"], work).stdout + run([*f, "lint", "--help"], work).stdout,
        semgrep=helps([*s, "scan", "--help"], work, "--baseline-commit"),
    )

    # the configuration nearest to each file: two folders, one silencing the finding
    nested = work / "nested"
    for name in ("a", "b"):
        (nested / name).mkdir(parents=True)
        (nested / name / "m.py").write_text(BUG + "import os\nx = f'plain'\n")
    (nested / "b" / "pyproject.toml").write_text(
        '[tool.gradgate]\nignore = ["GG001"]\n[tool.ruff.lint]\nselect = ["E"]\n'
        '[tool.fixit]\ndisable = ["fixit.rules:NoRedundantFString"]\n'
    )
    gg = run([*g, "check", "a", "b"], nested).stdout
    rf = run([*r, "check", "--no-cache", "--output-format", "concise", "a", "b"], nested).stdout
    fx = run([*f, "lint", "a", "b"], nested).stdout
    row(
        "each file gets the configuration nearest to it",
        gradgate="a/m.py" in gg and "b/m.py" not in gg,
        ruff="a/m.py:6:8: F401" in rf and "b/m.py:6:8: F401" not in rf,
        fixit="NoRedundantFString" in fx and "b/m.py" not in fx,
    )

    # .gitignore: a git repository whose ignored file holds the finding
    repo = work / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    (repo / ".gitignore").write_text("ignored.py\n")
    (repo / "ignored.py").write_text(BUG + "import os\nx = f'plain'\n")
    (repo / "kept.py").write_text("y = 1\n")
    row(
        "respects .gitignore",
        gradgate="ignored.py" not in run([*g, "check", "."], repo).stdout,
        ruff="ignored.py" not in run([*r, "check", "--no-cache", "--select", "F401", "."], repo).stdout,
        fixit="ignored.py" not in run([*f, "lint", "."], repo).stdout,
    )

    # LibCST's own codemod runner: a CodemodCommand that `libcst.tool list` shows
    (work / ".libcst.codemod.yaml").write_text("modules: ['gradgate.codemod', 'fixit']\n")
    listed = run([sys.executable, "-m", "libcst.tool", "list"], work).stdout
    row(
        "a command of LibCST's codemod runner (`python -m libcst.tool codemod`)",
        gradgate="FixGradModeGates" in listed,
        fixit=any(line and "gradgate" not in line.lower() and "Fix" in line for line in listed.splitlines()),
    )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ruff", default="ruff")
    parser.add_argument("--fixit", default="fixit")
    parser.add_argument("--semgrep", default="semgrep")
    args = parser.parse_args()
    tools = {
        "gradgate": [sys.executable, "-m", "gradgate"],
        "ruff": [args.ruff],
        "fixit": [args.fixit],
        "semgrep": [args.semgrep],
    }
    with tempfile.TemporaryDirectory() as temporary:
        work = Path(temporary)
        versions = {name: run([*cmd, "--version"], work).stdout.strip().splitlines()[-1] for name, cmd in tools.items()}
        rows = checks(tools, work)
    names = list(tools)
    print("| | " + " | ".join(versions[n] for n in names) + " |")
    print("|---|" + "---|" * len(names))
    for row, cells in rows.items():
        print(
            f"| {row} | "
            + " | ".join(("yes" if cells[n] else "no") if n in cells else "not checked" for n in names)
            + " |"
        )


if __name__ == "__main__":
    main()
