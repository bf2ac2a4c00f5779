"""No silent passes (issue 28.2) and the command line's ruff options (28.7): a named file
that cannot be parsed is exit 2 even with no grad-mode token in it; a named notebook is
refused; ``--config`` reads any file name and refuses unknown keys and files;
``--select GG100`` alone reports unused suppressions; ``--extend-select``,
``--extend-ignore``, ``--per-file-ignores``, ``--show-files``, ``--show-settings``."""

from __future__ import annotations

from conftest import run_cli

FLAGGED = b"""import torch


def forward(x, ub_overlap_ag):
    ub_overlap_ag = ub_overlap_ag and torch.is_grad_enabled()
    return run(x, ub_overlap_ag=ub_overlap_ag)
"""
FINDING = (
    "mod.py:5:39: GG001 forward communication flag `ub_overlap_ag` is gated on grad mode "
    "(`torch.is_grad_enabled()`): under torch.no_grad() the requested path is silently dropped\n"
)


def test_named_file_with_a_syntax_error_and_no_token_is_exit_2(tmp_path):
    (tmp_path / "bad.py").write_bytes(b"def f(:\n    pass\n")
    for extra in ((), ("--cache-dir", str(tmp_path / "cache")), ("--cache-dir", str(tmp_path / "cache"))):
        done = run_cli("check", *extra, "bad.py", cwd=tmp_path)
        assert done.returncode == 2
        assert done.stderr == b"error: bad.py: syntax error at 1:7: invalid syntax\n"
        assert done.stdout == b"Found 0 findings. 1 file could not be checked.\n"
    fixed = run_cli("fix", "bad.py", cwd=tmp_path)
    assert fixed.returncode == 2
    assert fixed.stderr.startswith(b"error: bad.py: syntax error at 1:7: invalid syntax\n")


def test_named_file_that_does_not_decode_is_exit_2(tmp_path):
    (tmp_path / "latin.py").write_bytes(b"x = '\xe9'\n")
    done = run_cli("check", "latin.py", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr == b"error: latin.py: cannot decode as utf-8: byte 0xe9 at offset 5\n"


def test_a_named_notebook_is_refused(tmp_path):
    notebook = b'{"cells": [{"cell_type": "code", "source": ["x = torch.is_grad_enabled()"]}]}\n'
    (tmp_path / "nb.ipynb").write_bytes(notebook)
    done = run_cli("check", "nb.ipynb", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr == (
        b"error: nb.ipynb: a Jupyter notebook: gradgate checks Python files only "
        b"(export its code cells with `jupyter nbconvert --to script`, and check that)\n"
    )
    piped = run_cli("check", "--stdin-filename", "nb.ipynb", "-", cwd=tmp_path, input=notebook)
    assert piped.returncode == 2
    assert b"Error: --stdin-filename nb.ipynb: a Jupyter notebook" in piped.stderr
    # a folder's notebooks are not walked: only its Python files
    (tmp_path / "mod.py").write_bytes(FLAGGED)
    walked = run_cli("check", "--show-files", ".", cwd=tmp_path)
    assert (walked.returncode, walked.stdout) == (0, b"mod.py\n")


def test_config_of_any_name_is_read_at_its_top_level(tmp_path):
    (tmp_path / "mod.py").write_bytes(FLAGGED)
    (tmp_path / "alt.toml").write_text('select = ["GG002"]\n')
    done = run_cli("check", "--config", "alt.toml", "mod.py", cwd=tmp_path)
    assert (done.returncode, done.stdout) == (0, b"All checks passed.\n")
    (tmp_path / "alt.toml").write_text('select = ["GG001"]\nselct = ["GG002"]\n')
    typo = run_cli("check", "--config", "alt.toml", "mod.py", cwd=tmp_path)
    assert typo.returncode == 2
    assert typo.stderr.decode().endswith(
        "Error: alt.toml: unknown key in the top level of the file: selct (known: backward-flag-patterns, "
        "comm-apis, comm-flag-patterns, exclude, extend-select, grad-mode-functions, grad-mode-names, ignore, "
        "inference-mode-functions, per-file-ignores, select)\n"
    )


def test_config_files_that_hold_no_settings_are_errors(tmp_path):
    (tmp_path / "mod.py").write_bytes(FLAGGED)
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\n')
    (tmp_path / "folder").mkdir()
    expected = {
        "pyproject.toml": "Error: pyproject.toml: no [tool.gradgate] table (gradgate's settings go there)\n",
        "missing.toml": "Error: missing.toml: cannot read: No such file or directory\n",
        "folder": "Error: folder: is a directory, not a configuration file\n",
    }
    for name, message in expected.items():
        done = run_cli("check", "--config", name, "mod.py", cwd=tmp_path)
        assert done.returncode == 2, name
        assert done.stderr.decode().endswith(message)
        assert done.stdout == b""


def test_select_gg100_alone_reports_the_unused_suppressions_only(tmp_path):
    used = b"import torch\n\n\ndef f(ub_overlap_ag):\n    ub_overlap_ag = ub_overlap_ag and torch.is_grad_enabled()  # gradgate: ignore[GG001]\n    return ub_overlap_ag\n"
    (tmp_path / "used.py").write_bytes(used)
    (tmp_path / "unused.py").write_bytes(b"x = 1  # gradgate: ignore[GG001]\n")
    done = run_cli("check", "--select", "GG100", "used.py", "unused.py", cwd=tmp_path)
    assert done.returncode == 1
    assert done.stdout == (
        b"unused.py:1:8: GG100 unused suppression `# gradgate: ignore[GG001]`: nothing is reported here\n"
        b"Found 1 finding.\n"
    )
    # with its rule ignored, a suppression is not judged
    ignored = run_cli("check", "--select", "GG100", "--ignore", "GG001", "unused.py", cwd=tmp_path)
    assert (ignored.returncode, ignored.stdout) == (0, b"All checks passed.\n")


def test_extend_select_extend_ignore_and_per_file_ignores_options(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "mod.py").write_bytes(FLAGGED)
    (tmp_path / "unused.py").write_bytes(b"x = 1  # gradgate: ignore[GG001]\n")
    extended = run_cli("check", "--extend-select", "GG100", "unused.py", cwd=tmp_path)
    assert extended.returncode == 1 and b"unused.py:1:8: GG100 " in extended.stdout
    skipped = run_cli("check", "--extend-ignore", "GG001", "pkg/mod.py", cwd=tmp_path)
    assert (skipped.returncode, skipped.stdout) == (0, b"All checks passed.\n")
    per_file = run_cli("fix", "--per-file-ignores", "pkg/*:GG001", "pkg/mod.py", cwd=tmp_path)
    assert per_file.returncode == 0
    assert (tmp_path / "pkg" / "mod.py").read_bytes() == FLAGGED
    other = run_cli("check", "--per-file-ignores", "tests/*:GG001", "pkg/mod.py", cwd=tmp_path)
    assert other.returncode == 1 and other.stdout.startswith(b"pkg/" + FINDING.encode())
    bad = run_cli("check", "--per-file-ignores", "GG001", "pkg/mod.py", cwd=tmp_path)
    assert bad.returncode == 2
    assert bad.stderr.decode().endswith(
        "Error: --per-file-ignores 'GG001': expected GLOB:CODES (`tests/*:GG001,GG003`)\n"
    )


def test_show_files_and_show_settings(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.gradgate]\nignore = ["GG003"]\nexclude = ["gen/*"]\n')
    for name in ("a.py", "gen/b.py", "sub/c.py"):
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_bytes(b"x = 1\n")
    files = run_cli("check", "--show-files", cwd=tmp_path)
    assert (files.returncode, files.stdout) == (0, b"a.py\nsub/c.py\n")
    settings = run_cli("check", "--show-settings", "--per-file-ignores", "sub/*:GG001", "sub/c.py", cwd=tmp_path)
    assert settings.returncode == 0
    lines = settings.stdout.decode().splitlines()
    assert lines[:2] == ["Resolved settings for: sub/c.py", "Settings path: pyproject.toml"]
    assert "ignore = ('GG003', 'GG001')" in lines
    assert "exclude = ('gen/*',)" in lines
    assert "per_file_ignores = (('sub/*', ('GG001',)),)" in lines


def test_default_excludes_are_ruffs(tmp_path):
    """ruff's default folders are skipped when walking (issue 28.7), named files are not."""
    folders = ["dist", "_build", "buck-out", "__pypackages__", "build", ".direnv", ".pytype", ".vscode", "venv"]
    for folder in folders:
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "mod.py").write_bytes(FLAGGED)
    (tmp_path / "mod.py").write_bytes(FLAGGED)
    walked = run_cli("check", "--show-files", ".", cwd=tmp_path)
    assert (walked.returncode, walked.stdout) == (0, b"mod.py\n")
    named = run_cli("check", "dist/mod.py", cwd=tmp_path)
    assert named.returncode == 1 and named.stdout.startswith(b"dist/" + FINDING.encode())


def test_show_source_caret_after_wide_characters(tmp_path):
    """The caret lands under the finding after wide (CJK) characters and tabs (issue 28.7)."""
    source = 'import torch\n\n\ndef f(ub_overlap_ag):\n\tub_overlap_ag = ub_overlap_ag and ("通信" and torch.is_grad_enabled())\n\treturn ub_overlap_ag\n'
    (tmp_path / "wide.py").write_text(source, encoding="utf-8")
    done = run_cli("check", "--show-source", "--no-cache", "wide.py", cwd=tmp_path)
    lines = done.stdout.decode().splitlines()
    assert lines[1] == '    \tub_overlap_ag = ub_overlap_ag and ("通信" and torch.is_grad_enabled())'
    # 35 characters, then `"通信" and ` (9 characters, 11 cells), then the read
    assert lines[2] == "    \t" + " " * (35 + 11) + "^" * 23


def test_sarif_fix_says_what_it_does(tmp_path):
    """A fix that deletes the statement is described so in SARIF (issue 28.7)."""
    import json

    (tmp_path / "mod.py").write_bytes(FLAGGED)
    done = run_cli("check", "--format", "sarif", "mod.py", cwd=tmp_path)
    (result,) = json.loads(done.stdout)["runs"][0]["results"]
    assert result["fixes"][0]["description"]["text"] == "Delete the statement (it only disables, or would read `x = x`)"
