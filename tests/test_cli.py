"""The command line as users and CI see it: output formats, exit codes, errors."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from conftest import run_cli

BUGGY = b"def f(ub_overlap_ag, is_grad_enabled, x):\n    ub_overlap_ag = ub_overlap_ag and is_grad_enabled and x\n    return ub_overlap_ag\n"
CLEAN = b"def f(ub_overlap_ag, x):\n    return ub_overlap_ag and x\n"


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "buggy.py").write_bytes(BUGGY)
    (tmp_path / "pkg" / "clean.py").write_bytes(CLEAN)
    return tmp_path


def test_exit_0_when_clean(tree):
    result = run_cli("check", "pkg/clean.py", cwd=tree)
    assert (result.returncode, result.stdout, result.stderr) == (0, b"All checks passed.\n", b"")


def test_exit_1_with_findings_text(tree):
    result = run_cli("check", "pkg", cwd=tree)
    assert result.returncode == 1
    assert result.stdout.decode().splitlines() == [
        f"pkg{os.sep}buggy.py:2:39: GG001 forward communication flag `ub_overlap_ag` is gated "
        "on grad mode (`is_grad_enabled`): under torch.no_grad() the requested path is "
        "silently dropped",
        "Found 1 finding (1 fixable with `gradgate fix`).",
    ]


def test_default_path_is_cwd(tree):
    result = run_cli("check", "--format", "json", cwd=tree / "pkg")
    assert result.returncode == 1
    assert [f["path"] for f in json.loads(result.stdout)] == ["buggy.py"]


def test_json_output(tree):
    result = run_cli("check", "--format", "json", "pkg", cwd=tree)
    assert result.returncode == 1
    assert json.loads(result.stdout) == [
        {
            "path": f"pkg{os.sep}buggy.py",
            "line": 2,
            "column": 39,
            "end_line": 2,
            "end_column": 54,
            "rule": "GG001",
            "message": "forward communication flag `ub_overlap_ag` is gated on grad mode "
            "(`is_grad_enabled`): under torch.no_grad() the requested path is silently dropped",
            "fixable": True,
            "applicability": "safe",
            # the fix as the smallest text edit: `is_grad_enabled and ` goes
            "fix": {"line": 2, "column": 39, "end_line": 2, "end_column": 59, "content": ""},
            # how grad mode got there: its capture, then the decision
            "flow": [
                {
                    "path": f"pkg{os.sep}buggy.py",
                    "line": 1,
                    "column": 22,
                    "message": "parameter `is_grad_enabled` taken as grad mode (no caller in the module supplies it)",
                },
                {
                    "path": f"pkg{os.sep}buggy.py",
                    "line": 2,
                    "column": 39,
                    "message": "grad mode decides `ub_overlap_ag` here",
                },
            ],
        }
    ]


def test_show_source(tree):
    result = run_cli("check", "--show-source", "pkg/buggy.py", cwd=tree)
    lines = result.stdout.decode().splitlines()
    assert lines[1] == "        ub_overlap_ag = ub_overlap_ag and is_grad_enabled and x"
    assert lines[2] == "    " + " " * 38 + "^" * 15
    assert lines[3:6] == [
        "    note: pkg/buggy.py:1:22: parameter `is_grad_enabled` taken as grad mode (no caller in the module supplies it)",
        "    note: pkg/buggy.py:2:39: grad mode decides `ub_overlap_ag` here",
        "    help: remove the grad-mode operand (`gradgate fix`)",
    ]


def test_unparsable_file_exit_2_and_others_still_reported(tree):
    (tree / "pkg" / "broken.py").write_bytes(b"def f(:\n    is_grad_enabled\n")
    result = run_cli("check", "--format", "json", "pkg", cwd=tree)
    assert result.returncode == 2
    assert [f["path"] for f in json.loads(result.stdout)] == [f"pkg{os.sep}buggy.py"]
    assert result.stderr.decode() == f"error: pkg{os.sep}broken.py: syntax error at 1:7: invalid syntax\n"


def test_missing_path_exit_2(tree):
    result = run_cli("check", "nope.py", "pkg/buggy.py", cwd=tree)
    assert result.returncode == 2
    assert result.stderr.decode() == "error: nope.py: no such file or directory\n"
    assert "pkg/buggy.py:2:39: GG001" in result.stdout.decode()


def test_usage_errors_exit_2(tree):
    assert run_cli("check", "--format", "xml", cwd=tree).returncode == 2
    assert run_cli("bogus", cwd=tree).returncode == 2
    unknown = run_cli("explain", "GG999", cwd=tree)
    assert unknown.returncode == 2
    assert "unknown rule 'GG999'" in unknown.stderr.decode()


def test_select_and_ignore(tree):
    assert run_cli("check", "--ignore", "GG001", "pkg", cwd=tree).returncode == 0
    assert run_cli("check", "--select", "GG001", "pkg", cwd=tree).returncode == 1
    assert run_cli("check", "--select", "GG", "pkg", cwd=tree).returncode == 1


def test_fix_writes_and_reports_counts(tree):
    result = run_cli("fix", "pkg", cwd=tree)
    assert result.returncode == 0
    assert result.stderr.decode().splitlines() == [
        f"Fixed 1 finding in pkg{os.sep}buggy.py",
        "Fixed 1 finding in 1 file; 0 left.",
    ]
    assert (tree / "pkg" / "buggy.py").read_bytes() == BUGGY.replace(b" and is_grad_enabled", b"")
    assert (tree / "pkg" / "clean.py").read_bytes() == CLEAN


def test_fix_exit_1_when_findings_are_left(tree):
    (tree / "pkg" / "left.py").write_bytes(
        b"def f(ub_overlap_ag, is_grad_enabled):\n    ub_overlap_ag = ub_overlap_ag or is_grad_enabled\n"
    )
    result = run_cli("fix", "pkg", cwd=tree)
    assert result.returncode == 1
    assert f"pkg{os.sep}left.py:2:38: GG001" in result.stdout.decode()
    assert "Fixed 1 finding in 1 file; 1 left." in result.stderr.decode()


def test_fix_diff_prints_and_writes_nothing(tree):
    result = run_cli("fix", "--diff", "pkg", cwd=tree)
    assert result.returncode == 1  # a change is pending (as ruff's --diff)
    assert (tree / "pkg" / "buggy.py").read_bytes() == BUGGY
    assert result.stdout.decode() == (
        f"--- a/pkg{os.sep}buggy.py\n+++ b/pkg{os.sep}buggy.py\n@@ -1,3 +1,3 @@\n"
        " def f(ub_overlap_ag, is_grad_enabled, x):\n"
        "-    ub_overlap_ag = ub_overlap_ag and is_grad_enabled and x\n"
        "+    ub_overlap_ag = ub_overlap_ag and x\n"
        "     return ub_overlap_ag\n"
    )
    assert "Would fix 1 finding in 1 file; 0 left." in result.stderr.decode()


def test_rules_and_explain(tree):
    listed = run_cli("rules", cwd=tree)
    assert listed.returncode == 0
    assert listed.stdout.decode().splitlines()[0].startswith("GG001  forward-comm-gated-on-grad-mode")
    explained = run_cli("explain", "gg001", cwd=tree)
    assert explained.returncode == 0
    text = explained.stdout.decode()
    for heading in (
        "## What it does",
        "## Why is this bad?",
        "## Example",
        "## Use instead",
        "## Fix safety",
        "## References",
    ):
        assert heading in text
    assert "https://github.com/NVIDIA/TransformerEngine/pull/3546" in text


def test_lint_path_never_imports_torch(tree):
    """Every lint command, run with a torch (and transformer_engine) on the path that
    leaves a mark when imported, ends as it should: its own exit code and output, no
    mark, no traceback. A crash also exits 1, like a check with findings, so the exit
    code alone cannot tell an import of torch from a finding."""
    import subprocess
    import sys

    from conftest import ROOT

    marks = tree / "marks"
    marks.mkdir()
    for name in ("torch", "transformer_engine"):
        (tree / "poison" / name).mkdir(parents=True)
        (tree / "poison" / name / "__init__.py").write_text(
            f"open({str(marks / name)!r}, 'w').close()\nraise ImportError('lint imported {name}')\n"
        )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tree / "poison"), str(ROOT)])}
    expected = {  # command: (exit code, a line its output must hold)
        ("check", "pkg"): (1, f"pkg{os.sep}buggy.py:2:39: GG001 forward communication flag `ub_overlap_ag`"),
        ("fix", "--diff", "pkg"): (1, "+    ub_overlap_ag = ub_overlap_ag and x"),
        ("rules",): (0, "GG001  forward-comm-gated-on-grad-mode"),
        ("explain", "GG001"): (0, "## What it does"),
    }
    for command, (code, line) in expected.items():
        result = subprocess.run([sys.executable, "-m", "gradgate", *command], cwd=tree, capture_output=True, env=env)
        out, err = result.stdout.decode(), result.stderr.decode()
        assert result.returncode == code, (command, err)
        assert any(text.startswith(line) for text in out.splitlines()), (command, out)
        assert "Traceback" not in err and "lint imported" not in out + err, (command, err)
        assert sorted(p.name for p in marks.iterdir()) == [], command


def test_check_in_process_leaves_torch_unimported(tree):
    """With the real torch importable (CI installs it), a check run in-process ends
    with neither torch nor transformer_engine in ``sys.modules``."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from gradgate.cli import run\n"
        "print('exit', run(['check', 'pkg']))\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'transformer_engine')))\n"
    )
    from conftest import ROOT

    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    result = subprocess.run([sys.executable, "-c", code], cwd=tree, capture_output=True, text=True, env=env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-2:] == ["exit 1", "[]"], result.stdout


def test_a_run_served_by_the_cache_imports_no_engine(tree, tmp_path):
    """Every file from the cache (the second run re-reads them: their status is too
    recent to be trusted, their content is unchanged): the engine, its model and LibCST
    stay unimported, and the output is the first run's."""
    import subprocess
    import sys

    cache = str(tmp_path / "cache")
    first = run_cli("check", "--cache-dir", cache, "pkg", cwd=tree)
    code = (
        "import sys\n"
        "from gradgate.cli import run\n"
        f"print('exit', run(['check', '--cache-dir', {cache!r}, 'pkg']))\n"
        "print(sorted(m for m in sys.modules if m in ('gradgate.engine', 'gradgate.model', 'libcst')))\n"
    )
    from conftest import ROOT

    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    second = subprocess.run([sys.executable, "-c", code], cwd=tree, capture_output=True, text=True, env=env)
    assert second.returncode == 0, second.stderr
    assert first.returncode == 1
    assert second.stdout.splitlines() == [*first.stdout.decode().splitlines(), "exit 1", "[]"]


@pytest.mark.parametrize("command, collector_on", [(["check", "--no-cache", "pkg"], False), (["rules"], True)])
def test_check_and_fix_end_with_the_cyclic_collector_off_other_commands_keep_it(tree, command, collector_on):
    """Under ``main`` a check (or fix) turns the collector off for the rest of the process
    (its first pass after a run scanned every object the run made); other commands (the
    server, the harness, the witness, which run long or run torch) keep it on."""
    import subprocess
    import sys

    from conftest import ROOT

    code = (
        "import gc, sys\n"
        "import gradgate.cli as cli\n"
        "end = cli._exit_now\n"
        "cli._exit_now = lambda code: (print('collector', gc.isenabled(), file=sys.stderr), end(code))\n"
        f"sys.argv = ['gradgate', *{command!r}]\n"
        "cli.main()\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    result = subprocess.run([sys.executable, "-c", code], cwd=tree, capture_output=True, text=True, env=env)
    assert result.stderr.splitlines()[-1] == f"collector {collector_on}", result.stderr


@pytest.mark.parametrize(
    "args, usage, error",
    [
        (
            ["check", "--format", "xml"],
            "gradgate check [OPTIONS] [PATHS]...",
            "argument --format: invalid choice: "
            "'xml' (choose from 'text', 'json', 'sarif', 'github', 'junit', 'gitlab')",
        ),
        (["fix", "-j", "0"], "gradgate fix [OPTIONS] [PATHS]...", "argument --jobs/-j: 0 is not in the range x>=1"),
        (
            ["check", "-j", "two"],
            "gradgate check [OPTIONS] [PATHS]...",
            "argument --jobs/-j: 'two' is not a valid integer",
        ),
        (["check", "--no-cach", "-h"], "gradgate check [OPTIONS] [PATHS]...", "unrecognized arguments: --no-cach"),
        (["explain"], "gradgate explain [OPTIONS] CODE", "Missing argument 'CODE'."),
        (
            ["check", "--cache-dir", "pkg/buggy.py", "pkg"],
            "gradgate check [OPTIONS] [PATHS]...",
            "--cache-dir pkg/buggy.py: not a directory",
        ),
        (["explain", "GG999"], "gradgate explain [OPTIONS] CODE", "unknown rule 'GG999'; `gradgate rules` lists them"),
        (["lint"], "gradgate [OPTIONS] COMMAND [ARGS]...", "No such command 'lint'."),
        (["--verbose"], "gradgate [OPTIONS] COMMAND [ARGS]...", "No such option: --verbose"),
    ],
)
def test_usage_errors_name_the_command_and_exit_2(tree, args, usage, error):
    """A command line gradgate cannot run: the command's usage, a hint, the error, exit 2
    (an unknown option is refused even beside -h, and options are never abbreviated)."""
    result = run_cli(*args, cwd=tree)
    hint = f"gradgate {args[0]} -h" if not args[0].startswith("-") and args[0] != "lint" else "gradgate -h"
    assert (result.returncode, result.stdout) == (2, b"")
    assert result.stderr.decode() == f"Usage: {usage}\nTry '{hint}' for help.\n\nError: {error}\n"


def test_options_go_anywhere_and_help_lists_every_command(tree):
    """Options before, between and after the paths (as pre-commit passes them), paths
    after `--`, and the top-level help lists the commands, the optional ones too."""
    mixed = run_cli("check", "pkg/buggy.py", "--no-cache", "pkg/clean.py", "-q", cwd=tree)
    ordered = run_cli("check", "--no-cache", "-q", "pkg/buggy.py", "pkg/clean.py", cwd=tree)
    assert (mixed.returncode, mixed.stdout, mixed.stderr) == (ordered.returncode, ordered.stdout, ordered.stderr)
    assert mixed.returncode == 1 and mixed.stdout.count(b"GG001") == 1
    (tree / "-dash.py").write_bytes(BUGGY)  # after `--`, an argument is a path even with a leading `-`
    dashed = run_cli("check", "--no-cache", "-q", "--", "-dash.py", cwd=tree)
    assert (dashed.returncode, dashed.stdout.split(b" GG001 ")[0]) == (1, b"-dash.py:2:39:")
    top = run_cli("--help", cwd=tree)
    assert top.returncode == 0
    listed = [line.split()[0] for line in top.stdout.decode().split("Commands:\n")[1].splitlines()]
    assert listed == ["check", "explain", "fix", "harness", "rules", "server", "witness"]
    bare = run_cli(cwd=tree)
    assert (bare.returncode, bare.stdout, bare.stderr) == (2, b"", top.stdout)
    from gradgate import __version__

    assert run_cli("--version", cwd=tree).stdout == f"gradgate, version {__version__}\n".encode()


@pytest.mark.parametrize("command", ["harness", "witness"])
def test_the_click_commands_take_h_for_help(tree, command):
    result = run_cli(command, "-h", cwd=tree)
    assert result.returncode == 0
    assert result.stdout.decode().splitlines()[0].startswith(f"Usage: gradgate {command} [OPTIONS]")


def test_output_a_stream_cannot_encode_is_escaped_not_a_crash(tree):
    (tree / "\u00fcn\u00ef.py").write_bytes(BUGGY)
    result = run_cli("check", "--no-cache", "-q", "\u00fcn\u00ef.py", cwd=tree, env={"PYTHONIOENCODING": "ascii"})
    assert (result.returncode, result.stderr) == (1, b"")
    assert result.stdout.startswith(b"\\xfcn\\xef.py:2:39: GG001 ")
