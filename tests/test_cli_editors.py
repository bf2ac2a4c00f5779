"""The command line as ruff users know it: standard input, configuration per file,
force-exclude, .gitignore, rule codes, exit-code knobs, output files, quiet, statistics,
colour, formats (text on one line, junit, gitlab, github errors), suppressions."""

from __future__ import annotations

import json
import os
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from conftest import run_cli

BUGGY = b"def f(ub_overlap_ag, is_grad_enabled, x):\n    ub_overlap_ag = ub_overlap_ag and is_grad_enabled and x\n    return ub_overlap_ag\n"
FIXED = BUGGY.replace(b" and is_grad_enabled", b"")
MESSAGE = (
    "forward communication flag `ub_overlap_ag` is gated on grad mode (`is_grad_enabled`): "
    "under torch.no_grad() the requested path is silently dropped"
)


def _where(stdout: bytes) -> list[str]:
    return [line.split(": GG")[0] for line in stdout.decode().splitlines() if ": GG0" in line]


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "buggy.py").write_bytes(BUGGY)
    return tmp_path


# -- standard input ------------------------------------------------------------------
def test_check_stdin(tree):
    result = run_cli("check", "-", cwd=tree, input=BUGGY)
    assert result.returncode == 1
    assert result.stdout.decode().splitlines() == [
        f"-:2:39: GG001 {MESSAGE}",
        "Found 1 finding (1 fixable with `gradgate fix`).",
    ]


def test_check_stdin_filename_takes_that_files_config_and_ignores(tree):
    (tree / "pkg" / "pyproject.toml").write_text(
        '[tool.gradgate]\nexclude = ["vendored_*.py"]\nper-file-ignores = { "legacy.py" = ["GG001"] }\n'
    )
    named = run_cli("check", "--stdin-filename", "pkg/new.py", "-", cwd=tree, input=BUGGY)
    assert (named.returncode, _where(named.stdout)) == (1, ["pkg/new.py:2:39"])
    ignored = run_cli("check", "--stdin-filename", "pkg/legacy.py", "-", cwd=tree, input=BUGGY)
    assert (ignored.returncode, ignored.stdout) == (0, b"All checks passed.\n")
    excluded = run_cli("check", "--stdin-filename", "pkg/vendored_x.py", "-", cwd=tree, input=BUGGY)
    assert (excluded.returncode, excluded.stdout) == (0, b"All checks passed.\n")


def test_fix_stdin_writes_the_fixed_code_to_stdout(tree):
    result = run_cli("fix", "--stdin-filename", "pkg/new.py", "-", cwd=tree, input=BUGGY)
    assert (result.returncode, result.stdout) == (0, FIXED)
    assert result.stderr.decode().splitlines() == [
        "Fixed 1 finding in pkg/new.py",
        "Fixed 1 finding in 1 file; 0 left.",
    ]
    left = (
        b"import torch\nclass F(torch.autograd.Function):\n    @staticmethod\n    def forward(ctx, x):\n"
        b"        if torch.is_grad_enabled():\n            ctx.save_for_backward(x)\n        return x\n"
    )
    unfixable = run_cli("fix", "-", cwd=tree, input=left)  # GG002: report only
    assert (unfixable.returncode, unfixable.stdout) == (1, left)  # the code, unchanged
    assert "-:5:12: GG002" in unfixable.stderr.decode()


def test_stdin_with_other_paths_is_a_usage_error(tree):
    result = run_cli("check", "-", "pkg", cwd=tree, input=BUGGY)
    assert result.returncode == 2 and b"standard input" in result.stderr


# -- configuration per file, exclude, .gitignore --------------------------------------
def test_each_file_gets_the_nearest_config(tree):
    (tree / "pkg_b").mkdir()
    (tree / "pkg_b" / "buggy.py").write_bytes(BUGGY)
    (tree / "pkg" / "pyproject.toml").write_text('[tool.gradgate]\nignore = ["GG001"]\n')
    # pkg's configuration does not leak to pkg_b, in either order
    for order in (("pkg", "pkg_b"), ("pkg_b", "pkg")):
        result = run_cli("check", *order, cwd=tree)
        assert (result.returncode, _where(result.stdout)) == (1, ["pkg_b/buggy.py:2:39"]), order
    # gradgate.toml (top-level keys) wins over pyproject.toml in the same folder
    (tree / "pkg" / "gradgate.toml").write_text('select = ["GG002"]\n')
    (tree / "pkg" / "pyproject.toml").write_text('[tool.gradgate]\nselect = ["GG001"]\n')
    assert run_cli("check", "pkg", cwd=tree).returncode == 0


def test_force_exclude_applies_exclude_to_named_files(tree):
    (tree / "pyproject.toml").write_text('[tool.gradgate]\nexclude = ["pkg/buggy.py"]\n')
    assert run_cli("check", "pkg/buggy.py", cwd=tree).returncode == 0
    assert run_cli("check", "pkg", cwd=tree).returncode == 0
    result = run_cli("check", "--no-force-exclude", "pkg/buggy.py", cwd=tree)
    assert (result.returncode, _where(result.stdout)) == (1, ["pkg/buggy.py:2:39"])


def test_gitignore_is_respected_by_default(tree):
    (tree / ".git").mkdir()  # a repository's top folder
    (tree / "generated").mkdir()
    (tree / "generated" / "gen.py").write_bytes(BUGGY)
    (tree / "pkg" / "scratch.py").write_bytes(BUGGY)
    (tree / "pkg" / "keep.py").write_bytes(BUGGY)
    (tree / ".gitignore").write_text("generated/\nscratch*.py\n")
    (tree / "pkg" / ".gitignore").write_text("buggy.py\n")
    (tree / ".git" / "info").mkdir()
    (tree / ".git" / "info" / "exclude").write_text("keep.py\n")
    (tree / "pkg" / ".gitignore").write_text("buggy.py\n!keep.py\n")  # a deeper file re-includes
    result = run_cli("check", ".", cwd=tree)
    assert _where(result.stdout) == ["pkg/keep.py:2:39"]
    everything = run_cli("check", "--no-respect-gitignore", ".", cwd=tree)
    assert _where(everything.stdout) == [
        "generated/gen.py:2:39",
        "pkg/buggy.py:2:39",
        "pkg/keep.py:2:39",
        "pkg/scratch.py:2:39",
    ]


@pytest.mark.parametrize("where", ["pyproject", "cli"])
def test_rule_codes_are_case_insensitive(tree, where):
    if where == "pyproject":
        (tree / "pyproject.toml").write_text('[tool.gradgate]\nselect = ["gg001"]\n')
        result = run_cli("check", "pkg", cwd=tree)
    else:
        result = run_cli("check", "--select", "gg001", "pkg", cwd=tree)
    assert (result.returncode, _where(result.stdout)) == (1, ["pkg/buggy.py:2:39"])


@pytest.mark.parametrize("args", [("--select", "GG9"), ("--ignore", "XX1"), ("--select", "")])
def test_unknown_rule_code_is_exit_2(tree, args):
    if args[1] == "":
        (tree / "pyproject.toml").write_text('[tool.gradgate]\nper-file-ignores = { "x.py" = ["nope1"] }\n')
        args = ()
    result = run_cli("check", *args, "pkg", cwd=tree)
    assert result.returncode == 2 and b"unknown rule code" in result.stderr
    assert result.stdout == b""


# -- exit codes and knobs ----------------------------------------------------------------
def test_exit_zero_and_exit_non_zero_on_fix(tree):
    assert run_cli("check", "--exit-zero", "pkg", cwd=tree).returncode == 0
    assert run_cli("fix", "--exit-non-zero-on-fix", "pkg", cwd=tree).returncode == 1
    assert (tree / "pkg" / "buggy.py").read_bytes() == FIXED
    assert run_cli("fix", "--exit-non-zero-on-fix", "pkg", cwd=tree).returncode == 0  # nothing fixed now


def test_output_file_quiet_and_statistics(tree):
    result = run_cli("check", "-q", "-o", "report.txt", "pkg", cwd=tree)
    assert (result.returncode, result.stdout, result.stderr) == (1, b"", b"")
    assert (tree / "report.txt").read_text() == f"pkg/buggy.py:2:39: GG001 {MESSAGE}\n"
    stats = run_cli("check", "--statistics", "-q", "pkg", cwd=tree)
    assert stats.stdout == b"1\tGG001\t[*] forward-comm-gated-on-grad-mode\n"
    quiet_fix = run_cli("fix", "-q", "--diff", "pkg", cwd=tree)
    assert quiet_fix.returncode == 1 and quiet_fix.stderr == b"" and quiet_fix.stdout.startswith(b"--- a/pkg/buggy.py")


def test_show_fixes(tree):
    check = run_cli("check", "--show-fixes", "pkg", cwd=tree)
    assert check.stdout.decode().splitlines()[1:3] == [
        "    help: remove the grad-mode operand (`gradgate fix`)",
        "    fix: replace 2:39-2:59 with ``",
    ]
    fixed = run_cli("fix", "--show-fixes", "pkg", cwd=tree)
    assert "pkg/buggy.py:\n    1 \u00d7 GG001 (forward-comm-gated-on-grad-mode)\n" in fixed.stderr.decode()


def test_colour_only_when_asked_or_on_a_terminal(tree):
    plain = run_cli("check", "pkg", cwd=tree)  # a pipe
    assert b"\x1b[" not in plain.stdout
    forced = run_cli("check", "pkg", cwd=tree, env={"FORCE_COLOR": "1"})
    assert forced.stdout.startswith(b"\x1b[1mpkg/buggy.py:2:39:\x1b[0m \x1b[1m\x1b[31mGG001\x1b[0m ")
    assert b"\x1b[" not in run_cli("check", "pkg", cwd=tree, env={"FORCE_COLOR": "1", "NO_COLOR": "1"}).stdout


def test_hidden_options_are_never_suggested(tree):
    result = run_cli("check", "--no-prefilte", "pkg", cwd=tree)
    assert result.returncode == 2
    assert result.stderr == (
        b"Usage: gradgate check [OPTIONS] [PATHS]...\nTry 'gradgate check -h' for help.\n\n"
        b"Error: unrecognized arguments: --no-prefilte\n"
    )
    assert b"--no-prefilter" not in run_cli("check", "-h", cwd=tree).stdout


def test_unsafe_fixes_reach_the_engine_and_count(tree, monkeypatch):
    """--unsafe-fixes is handed to lint_source (the v2 engine makes unsafe fixes), and an
    unsafe fix is counted as fixable only with it."""
    from conftest import invoke

    import gradgate.runner as runner
    from gradgate.records import replace
    from gradgate.results import Applicability

    seen = []
    real = runner.lint_source

    def recording(path, data, config, fix=False, prefilter=True, unsafe_fixes=False, **more):
        seen.append(unsafe_fixes)
        result = real(path, data, config, fix=fix, prefilter=prefilter, unsafe_fixes=unsafe_fixes, **more)
        return replace(result, findings=tuple(replace(f, applicability=Applicability.UNSAFE) for f in result.findings))

    monkeypatch.setattr(runner, "lint_source", recording)
    monkeypatch.chdir(tree)
    plain = invoke(["check", "--no-cache", "pkg"])
    assert plain.exit_code == 1 and seen == [False]
    assert plain.output.splitlines()[-1] == ("Found 1 finding. (1 hidden fix can be enabled with `--unsafe-fixes`.)")
    unsafe = invoke(["check", "--no-cache", "--unsafe-fixes", "pkg"])
    assert seen == [False, True]
    assert unsafe.output.splitlines()[-1] == "Found 1 finding (1 fixable with `gradgate fix --unsafe-fixes`)."


def test_json_check_analyses_each_file_once_and_caches_its_edits(tree, tmp_path, monkeypatch):
    """The edits JSON carries come from the analysis that found the findings (not a
    second one); cached with the result, a warm JSON run analyses nothing."""
    import json

    from conftest import invoke

    import gradgate.document as document
    import gradgate.runner as runner

    calls = []
    real = runner.lint_source

    def counting(path, data, config, **options):
        calls.append(options.get("edits", False))
        return real(path, data, config, **options)

    monkeypatch.setattr(runner, "lint_source", counting)
    monkeypatch.setattr(document, "lint_source", counting)
    monkeypatch.chdir(tree)
    cache = str(tmp_path / "cache")
    outputs = [invoke(["check", "--cache-dir", cache, "--format", "json", "pkg"]) for _ in range(2)]
    assert calls == [True]
    cold, warm = (json.loads(o.output) for o in outputs)
    assert cold == warm
    assert [f["fix"] for f in cold] == [{"line": 2, "column": 39, "end_line": 2, "end_column": 59, "content": ""}]


# -- formats -------------------------------------------------------------------------------
def test_text_keeps_one_finding_per_line():
    """A message quoting multi-line code (or a path with a newline) stays on one line."""
    from gradgate.reporters import render_text
    from gradgate.results import Finding

    finding = Finding(
        path="a\nb.py",
        rule="GG001",
        message="gated on (`torch.is_grad_enabled(\n)`)",
        line=3,
        column=39,
        end_line=4,
        end_column=6,
    )
    assert render_text([finding]) == "a\\nb.py:3:39: GG001 gated on (`torch.is_grad_enabled(\\n)`)\n"


def test_junit(tree):
    (tree / "pkg" / "broken.py").write_bytes(b"def f(:\n    is_grad_enabled\n")
    result = run_cli("check", "--format", "junit", "pkg", cwd=tree)
    assert result.returncode == 2
    root = ET.fromstring(result.stdout)
    # a file that could not be checked is an error, not a failure (issue 28.7)
    assert (root.tag, root.get("tests"), root.get("failures"), root.get("errors")) == ("testsuites", "2", "1", "1")
    cases = [(s.get("name"), s.get("errors"), c.get("name"), c[0].tag, c[0].text) for s in root for c in s]
    assert cases == [
        ("pkg/buggy.py", "0", "org.gradgate.GG001", "failure", f"line 2, col 39, {MESSAGE}"),
        ("pkg/broken.py", "1", "org.gradgate.error", "error", "syntax error at 1:7: invalid syntax"),
    ]
    clean = run_cli("check", "--format", "junit", "--ignore", "GG001", "pkg/buggy.py", cwd=tree)
    assert [c.get("name") for s in ET.fromstring(clean.stdout) for c in s] == ["No findings"]


def test_gitlab_code_quality(tree):
    (tree / "pkg" / "twice.py").write_bytes(BUGGY + BUGGY.replace(b"def f(", b"def g("))
    result = run_cli("check", "--format", "gitlab", "pkg", cwd=tree)
    assert result.returncode == 1
    issues = json.loads(result.stdout)
    assert [
        (i["check_name"], i["location"]["path"], i["location"]["positions"]["begin"], i["severity"]) for i in issues
    ] == [
        ("GG001", "pkg/buggy.py", {"line": 2, "column": 39}, "major"),
        ("GG001", "pkg/twice.py", {"line": 2, "column": 39}, "major"),
        ("GG001", "pkg/twice.py", {"line": 5, "column": 39}, "major"),
    ]
    assert issues[0]["description"] == f"GG001 {MESSAGE}"
    assert len({i["fingerprint"] for i in issues}) == 3  # identical lines, distinct issues


def test_parse_errors_are_github_annotations(tree):
    (tree / "pkg" / "broken.py").write_bytes(b"def f(:\n    is_grad_enabled\n")
    result = run_cli("check", "--format", "github", "pkg", cwd=tree)
    assert result.returncode == 2
    assert result.stdout.decode().splitlines()[0] == (
        "::error file=pkg/broken.py,line=1,col=7,title=gradgate error::"
        "pkg/broken.py: syntax error at 1:7: invalid syntax"
    )


def test_paths_are_relative_to_the_working_directory(tree):
    result = run_cli("check", "--format", "json", str(tree / "pkg"), cwd=tree)
    assert [f["path"] for f in json.loads(result.stdout)] == [os.path.join("pkg", "buggy.py")]
    dotted = run_cli("check", "./pkg/", cwd=tree)
    assert _where(dotted.stdout) == ["pkg/buggy.py:2:39"]


# -- suppressions ------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("comment", "silenced"),
    [
        ("# noqa: GG001", True),
        ("# noqa:GG001,E501", True),
        ("# NOQA: gg001", True),
        ("# noqa", True),
        ("# noqa: E501", False),
        ("# noqa: GG0011", False),
        ("# gradgate: ignore[gg001]", True),
        ("# gradgate: ignore", True),
        ("# gradgate: ignore[GG002]", False),
    ],
)
def test_noqa_and_gradgate_ignore(tree, comment, silenced):
    (tree / "pkg" / "buggy.py").write_bytes(BUGGY.replace(b"and x\n", b"and x  " + comment.encode() + b"\n"))
    assert run_cli("check", "pkg", cwd=tree).returncode == (0 if silenced else 1)


def test_ignore_file(tree):
    (tree / "pkg" / "buggy.py").write_bytes(b'"""Doc."""\n# gradgate: ignore-file\n' + BUGGY)
    assert run_cli("check", "pkg", cwd=tree).returncode == 0
    assert run_cli("check", "-", cwd=tree, input=(tree / "pkg" / "buggy.py").read_bytes()).returncode == 0
    # only as a comment of its own, not inside a string or after code
    (tree / "pkg" / "buggy.py").write_bytes(b"x = 1  # gradgate: ignore-file\n" + BUGGY)
    assert run_cli("check", "pkg", cwd=tree).returncode == 1


def test_add_noqa_is_byte_exact(tree):
    crlf = (
        b"# -*- coding: latin-1 -*-\r\n# caf\xe9\r\n"
        + BUGGY.replace(b"\n", b"\r\n").replace(b"and x\r\n", b"and x  # noqa: E501\r\n")
        + b"def g(ub_overlap_rs, is_grad_enabled):\r\n    ub_overlap_rs = ub_overlap_rs and (\r\n"
        b"        is_grad_enabled)  # gradgate: ignore[GG002]\r\n    return ub_overlap_rs"
    )
    (tree / "pkg" / "buggy.py").write_bytes(crlf)
    result = run_cli("check", "--add-noqa", "pkg", cwd=tree)
    assert (result.returncode, result.stderr) == (0, b"Added 2 suppressions in 1 file.\n")
    assert (tree / "pkg" / "buggy.py").read_bytes() == crlf.replace(
        b"and x  # noqa: E501\r\n", b"and x  # noqa: E501  # gradgate: ignore[GG001]\r\n"
    ).replace(b"# gradgate: ignore[GG002]", b"# gradgate: ignore[GG002, GG001]")
    assert run_cli("check", "pkg", cwd=tree).returncode == 0
    again = run_cli("check", "--add-noqa", "pkg", cwd=tree)
    assert again.stderr == b"Added 0 suppressions in 0 files.\n"


def test_json_keeps_fix_edits_when_per_file_ignores_drop_other_findings(tree):
    (tree / "pkg" / "buggy.py").write_bytes(
        b"import torch\ndef f(ub_overlap_ag, x):\n    ub_overlap_ag = ub_overlap_ag and torch.is_grad_enabled() and x\n"
        b"    return ub_overlap_ag\n\nclass F(torch.autograd.Function):\n    @staticmethod\n    def forward(ctx, x):\n"
        b"        if torch.is_grad_enabled():\n            ctx.save_for_backward(x)\n        return x\n"
    )
    (tree / "pyproject.toml").write_text('[tool.gradgate]\nper-file-ignores = { "pkg/buggy.py" = ["GG002"] }\n')
    result = run_cli("check", "--format", "json", "pkg", cwd=tree)
    (finding,) = json.loads(result.stdout)
    assert (finding["rule"], finding["fix"]) == (
        "GG001",
        {"line": 3, "column": 39, "end_line": 3, "end_column": 67, "content": ""},
    )
