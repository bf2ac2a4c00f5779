"""Bad inputs are reported clearly and never stop the run; odd-but-valid inputs are
analysed (and fixed) exactly like ordinary ones.

Errors (exit 2, one line ``error: PATH: reason`` on stderr per bad path, every other
file still analysed, nothing written to a bad path): syntax errors, undecodable bytes,
binary files named ``.py``, NUL bytes, bad coding cookies, a directory named ``x.py``,
broken symlinks, symlink loops, special files, a path that does not exist, nesting too
deep to parse.

Valid (exit 0/1 as the content says, findings at the right line/column, fixes keeping
encoding, BOM and line endings byte for byte): empty files, latin-1 coding cookie,
UTF-8 BOM, CRLF, mixed line endings, tabs, form feeds, no final newline, a 100k-line file.

The fixture tree is built at test time under ``tmp_path``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import ROOT, run_cli


@dataclass
class Ran:
    returncode: int
    stdout: bytes
    stderr: bytes


def cli(*args: str, cwd: Path) -> Ran:
    """``gradgate ARGS`` in this process (fast); an exception escaping it fails the test.
    A few tests below run the real subprocess (``run_cli``) as users do."""
    from conftest import invoke

    result = invoke(args, cwd=cwd)
    return Ran(result.exit_code, result.stdout_bytes, result.stderr_bytes)


BUGGY = (
    b"def f(ub_overlap_ag, is_grad_enabled, x):\n"
    b"    ub_overlap_ag = ub_overlap_ag and is_grad_enabled and x\n"
    b"    return ub_overlap_ag\n"
)
BUGGY_FIXED = BUGGY.replace(b" and is_grad_enabled", b"")
ERROR_LINE = re.compile(r"^error: (?P<path>.+?): (?P<reason>\S.*)$")


# -- the bad inputs ---------------------------------------------------------------
@dataclass
class Bad:
    name: str
    reason: str  # regex the reason must match (case-insensitive)
    make: object  # callable(root: Path) -> list of relative paths it reports
    #: named explicitly on the command line it is an error too (a directory is walked)
    explicit_error: bool = True


def _file(name: str, data: bytes):
    def make(root: Path) -> list[str]:
        (root / name).write_bytes(data)
        return [name]

    return make


def _directory(root: Path) -> list[str]:
    (root / "x.py").mkdir()
    (root / "x.py" / "inner.txt").write_text("not python\n")
    return ["x.py"]


def _broken_link(root: Path) -> list[str]:
    (root / "broken.py").symlink_to("does_not_exist.py")
    return ["broken.py"]


def _link_loop(root: Path) -> list[str]:
    (root / "loop_a.py").symlink_to("loop_b.py")
    (root / "loop_b.py").symlink_to("loop_a.py")
    (root / "self_loop.py").symlink_to("self_loop.py")
    return ["loop_a.py", "loop_b.py", "self_loop.py"]


def _fifo(root: Path) -> list[str]:
    os.mkfifo(root / "pipe.py")
    return ["pipe.py"]


PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x10" + bytes(range(256)) * 8
ELF_NO_NUL = bytes(b % 255 + 1 for b in range(4096))  # binary noise without a NUL byte

BAD_INPUTS = [
    Bad("syntax_error", r"syntax error at 1:7", _file("syntax.py", b"def f(:\n    is_grad_enabled\n")),
    Bad("syntax_error_late", r"syntax error at 3:", _file("syntax_late.py", b"x = 1\ny = is_grad_enabled\nz = (\n")),
    Bad(
        "indentation_error",
        r"syntax error|indent",
        _file("indent.py", b"def f():\n    x = 1\n      ub_overlap_ag = ub_overlap_ag and is_grad_enabled\n"),
    ),
    Bad("undecodable_line1", r"decod|encod", _file("undecodable1.py", b"x = '\xff\xfe'\nis_grad_enabled\n")),
    Bad(
        "undecodable_later",
        r"cannot decode as utf-8: byte 0xff",
        _file("undecodable3.py", b"x = 1\ny = 2\nz = '\xff'  # is_grad_enabled\n"),
    ),
    Bad("binary_png", r"binary|NUL", _file("image.py", PNG)),
    Bad("binary_without_nul", r"decod|encod", _file("noise.py", ELF_NO_NUL)),
    Bad("nul_byte", r"NUL", _file("nul.py", b"ub_overlap_ag = ub_overlap_ag and is_grad_enabled\x00\n")),
    Bad("unknown_cookie", r"encoding", _file("cookie.py", b"# -*- coding: klingon -*-\nis_grad_enabled\n")),
    Bad(
        "cookie_lies",
        r"cannot decode as ascii",
        _file("ascii.py", b"# coding: ascii\nx = '\xc3\xa9'  # is_grad_enabled\n"),
    ),
    Bad(
        "bom_and_latin1_cookie",
        r"encoding",
        _file("bom_cookie.py", b"\xef\xbb\xbf# coding: latin-1\nis_grad_enabled\n"),
    ),
    Bad(
        "too_deep",
        r"nested|cannot parse|too many|recursion",
        _file("deep.py", b"ub_overlap_ag = a and " + b"not " * 5000 + b"is_grad_enabled\n"),
    ),
    Bad("directory_named_py", r"directory", _directory, explicit_error=False),
    Bad("broken_symlink", r"broken symbolic link", _broken_link),
    Bad("symlink_loop", r"symbolic link", _link_loop),
]


def _good_tree(root: Path) -> None:
    (root / "good.py").write_bytes(BUGGY)
    (root / "sub").mkdir()
    (root / "sub" / "also_good.py").write_bytes(BUGGY)


def _snapshot(root: Path) -> dict[str, object]:
    out: dict[str, object] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in sorted(dirnames + filenames):
            path = Path(dirpath) / name
            rel = str(path.relative_to(root))
            if path.is_symlink():
                out[rel] = ("link", os.readlink(path))
            elif path.is_dir():
                out[rel] = ("dir",)
            elif path.is_file():
                out[rel] = ("file", path.read_bytes(), os.stat(path).st_mode)
            else:
                out[rel] = ("special", os.stat(path).st_mode)
    return out


def _errors(stderr: bytes) -> dict[str, str]:
    """stderr's ``error:`` lines as {path: reason}; fails on any other line or a
    traceback, and on two lines for one path."""
    out: dict[str, str] = {}
    for line in stderr.decode().splitlines():
        if line.startswith(("Fixed ", "Would fix ")):
            continue
        match = ERROR_LINE.match(line)
        assert match, f"unexpected stderr line: {line!r}\n{stderr.decode()}"
        assert match["path"] not in out, f"two errors for {match['path']}"
        out[match["path"]] = match["reason"]
    return out


def _good_paths(findings: list[dict]) -> list[tuple[str, int, int]]:
    return sorted((f["path"], f["line"], f["column"]) for f in findings)


GOOD_FINDINGS = [("good.py", 2, 39), (os.path.join("sub", "also_good.py"), 2, 39)]


@pytest.mark.parametrize("bad", BAD_INPUTS, ids=lambda b: b.name)
def test_bad_input_check(tmp_path, bad):
    _good_tree(tmp_path)
    reported = bad.make(tmp_path)
    result = cli("check", "--format", "json", "good.py", "sub", *reported, cwd=tmp_path)
    if not bad.explicit_error:  # a directory named on the command line is walked
        reported = []
    assert result.returncode == (2 if reported else 1), (result.returncode, result.stderr.decode())
    errors = _errors(result.stderr)
    assert sorted(errors) == sorted(reported)
    for path, reason in errors.items():
        assert re.search(bad.reason, reason, re.I), f"{path}: {reason!r} !~ {bad.reason!r}"
    assert _good_paths(json.loads(result.stdout)) == GOOD_FINDINGS


@pytest.mark.parametrize("bad", BAD_INPUTS, ids=lambda b: b.name)
def test_bad_input_found_by_walking(tmp_path, bad):
    """The same bad path met while walking a directory, in text mode."""
    _good_tree(tmp_path)
    reported = bad.make(tmp_path)
    result = cli("check", ".", cwd=tmp_path)
    assert result.returncode == 2, result.stderr.decode()
    errors = _errors(result.stderr)
    assert sorted(errors) == sorted(os.path.join(p) for p in reported)
    out = result.stdout.decode().splitlines()
    assert [line.split(": GG001")[0] for line in out if ": GG001 " in line] == [
        os.path.join("good.py") + ":2:39",
        os.path.join("sub", "also_good.py") + ":2:39",
    ]
    n = len(reported)
    assert out[-1] == (
        f"Found 2 findings (2 fixable with `gradgate fix`). {n} file{'s' if n != 1 else ''} could not be checked."
    )


@pytest.mark.parametrize("bad", BAD_INPUTS, ids=lambda b: b.name)
def test_bad_input_fix_writes_only_good_files(tmp_path, bad):
    _good_tree(tmp_path)
    reported = bad.make(tmp_path)
    before = _snapshot(tmp_path)
    result = cli("fix", ".", cwd=tmp_path)
    assert result.returncode == 2, result.stderr.decode()
    assert sorted(_errors(result.stderr)) == sorted(os.path.join(p) for p in reported)
    assert "Fixed 2 findings in 2 files; 0 left." in result.stderr.decode()
    after = _snapshot(tmp_path)
    assert after["good.py"][1] == BUGGY_FIXED
    assert after[os.path.join("sub", "also_good.py")][1] == BUGGY_FIXED
    untouched = {k: v for k, v in before.items() if "good" not in k}
    assert {k: after.get(k) for k in untouched} == untouched
    assert set(after) == set(before)  # nothing created (no temporary file left)


def test_all_bad_inputs_at_once(tmp_path):
    _good_tree(tmp_path)
    reported = [p for bad in BAD_INPUTS for p in bad.make(tmp_path)]
    result = run_cli("check", "--format", "json", ".", "missing.py", "missing_dir/", cwd=tmp_path)
    assert result.returncode == 2
    errors = _errors(result.stderr)
    assert sorted(errors) == sorted([os.path.join(p) for p in reported] + ["missing.py", "missing_dir/"])
    assert errors["missing.py"] == "no such file or directory"
    assert [(p.removeprefix("./"), line, c) for p, line, c in _good_paths(json.loads(result.stdout))] == GOOD_FINDINGS


def test_syntax_error_in_a_file_that_never_mentions_grad_mode(tmp_path):
    """By design the bytes pre-filter skips files holding no grad-mode token: they cannot
    hold a finding, so they are not parsed, and a syntax error in them is not gradgate's
    to report (parsing every file would cost ~1.6 s of CPU on TransformerEngine alone,
    five times ruff's whole run). ``--no-prefilter`` parses everything and reports it."""
    _good_tree(tmp_path)
    (tmp_path / "syntax_plain.py").write_bytes(b"def f(:\n    pass\n")
    fast = run_cli("check", "--format", "json", ".", cwd=tmp_path)
    assert (fast.returncode, fast.stderr) == (1, b"")
    assert [(p.removeprefix("./"), line, c) for p, line, c in _good_paths(json.loads(fast.stdout))] == GOOD_FINDINGS
    full = run_cli("check", "--no-prefilter", "--format", "json", ".", cwd=tmp_path)
    assert full.returncode == 2
    assert _errors(full.stderr) == {os.path.join("syntax_plain.py"): "syntax error at 1:7: invalid syntax"}


def test_a_file_libcst_cannot_parse_whole_is_checked_and_fixed_by_its_statements(tmp_path):
    """CPython accepts a backslash-CRLF as a file's last line; LibCST's tokenizer does
    not (found by tests/fuzz.py). The analysis needs no LibCST, so both paths report it;
    a fix hands LibCST only the statement it changes, so it is fixed too."""
    source = (
        b"def f(ub_overlap_ag, is_grad_enabled):\n"
        b"    ub_overlap_ag = ub_overlap_ag and is_grad_enabled\n"
        b"    return ub_overlap_ag\n"
        b"\\\r\n"
    )
    (tmp_path / "t.py").write_bytes(source)
    fast = run_cli("check", "--format", "json", "--no-cache", "t.py", cwd=tmp_path)
    assert (fast.returncode, fast.stderr) == (1, b"")
    assert [(f["line"], f["column"], f["fixable"]) for f in json.loads(fast.stdout)] == [(2, 39, True)]
    full = run_cli("check", "--format", "json", "--no-prefilter", "--no-cache", "t.py", cwd=tmp_path)
    assert (full.returncode, full.stderr, full.stdout) == (1, b"", fast.stdout)
    fixed = run_cli("fix", "--no-cache", "t.py", cwd=tmp_path)
    assert fixed.returncode == 0, fixed.stderr
    # `ub_overlap_ag = ub_overlap_ag` would be left: the statement goes
    assert (tmp_path / "t.py").read_bytes() == source.replace(
        b"    ub_overlap_ag = ub_overlap_ag and is_grad_enabled\n", b""
    )


def test_valid_python_libcst_cannot_represent_is_an_error_only_where_it_is_needed(tmp_path):
    """CPython accepts ``(a if b else c)and d``; LibCST refuses it (found by
    tests/fuzz.py). In a statement gradgate must parse with LibCST it is a clear error
    (exit 2, nothing written); elsewhere in the file it does not matter."""
    flagged = (
        "def f(ub_overlap_ag, is_grad_enabled, c, w):\n"
        "    ub_overlap_ag = (c if c else w)and ub_overlap_ag and is_grad_enabled\n"
    )
    elsewhere = (
        "def f(ub_overlap_ag, is_grad_enabled, c, w):\n"
        "    y = (c if c else w)and c\n"
        "    ub_overlap_ag = ub_overlap_ag and is_grad_enabled\n"
    )
    (tmp_path / "flagged.py").write_text(flagged)
    (tmp_path / "elsewhere.py").write_text(elsewhere)
    message = "LibCST cannot parse this file: Must have at least one space around boolean operator."
    # a check never needs LibCST: both are checked
    for name, line, column in (("flagged.py", 2, 58), ("elsewhere.py", 3, 39)):
        for flags in ((), ("--no-prefilter",)):
            check = run_cli("check", "--format", "json", "--no-cache", *flags, name, cwd=tmp_path)
            assert (check.returncode, check.stderr) == (1, b"")
            assert [(f["line"], f["column"]) for f in json.loads(check.stdout)] == [(line, column)]
    result = run_cli("fix", "--no-cache", "flagged.py", cwd=tmp_path)
    assert result.returncode == 2
    assert _errors(result.stderr) == {"flagged.py": message}
    assert (tmp_path / "flagged.py").read_text() == flagged
    fixed = run_cli("fix", "--no-cache", "elsewhere.py", cwd=tmp_path)
    assert fixed.returncode == 0, fixed.stderr
    assert (tmp_path / "elsewhere.py").read_text() == elsewhere.replace(
        "    ub_overlap_ag = ub_overlap_ag and is_grad_enabled\n", ""
    )


def test_missing_path_alone(tmp_path):
    result = cli("check", "nope.py", cwd=tmp_path)
    assert (result.returncode, result.stderr.decode()) == (2, "error: nope.py: no such file or directory\n")
    result = cli("fix", "nope/", "nope.py", cwd=tmp_path)
    assert result.returncode == 2
    assert sorted(_errors(result.stderr)) == ["nope.py", "nope/"]


def test_directory_symlink_loop_terminates_and_reports_each_file_once(tmp_path):
    _good_tree(tmp_path)
    (tmp_path / "sub" / "up").symlink_to("..")
    (tmp_path / "sub" / "self").symlink_to(".")
    result = cli("check", "--format", "json", ".", cwd=tmp_path)
    assert result.returncode == 1, result.stderr.decode()
    findings = json.loads(result.stdout)
    assert [(p.removeprefix("./"), line, c) for p, line, c in _good_paths(findings)] == GOOD_FINDINGS


def test_special_file_named_py_does_not_hang(tmp_path):
    """A FIFO (or any non-regular file) named ``.py`` must be reported, not opened and
    waited on forever."""
    _good_tree(tmp_path)
    _fifo(tmp_path)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    try:
        result = subprocess.run(
            [sys.executable, "-m", "gradgate", "check", "--format", "json", "."],
            cwd=tmp_path,
            capture_output=True,
            env=env,
            timeout=10,
        )
    except subprocess.TimeoutExpired:
        pytest.fail("`gradgate check .` hangs on a FIFO named pipe.py (it opens and reads it)")
    assert result.returncode == 2
    assert sorted(_errors(result.stderr)) == [os.path.join("pipe.py")]
    assert len(json.loads(result.stdout)) == 2


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their mode")
def test_unreadable_file(tmp_path):
    _good_tree(tmp_path)
    (tmp_path / "secret.py").write_bytes(BUGGY)
    (tmp_path / "secret.py").chmod(0)
    result = cli("check", ".", cwd=tmp_path)
    assert result.returncode == 2
    assert re.search(r"permission denied", _errors(result.stderr)[os.path.join("secret.py")], re.I)


# -- odd but valid inputs -----------------------------------------------------------
@dataclass
class Valid:
    name: str
    data: bytes
    findings: list[tuple[int, int]]  # (line, column) of each finding
    fixed: bytes | None = None  # expected bytes after fix (None: unchanged)


def _crlf(data: bytes) -> bytes:
    return data.replace(b"\n", b"\r\n")


def _mixed(data: bytes, endings: tuple[bytes, ...]) -> bytes:
    lines = data.split(b"\n")
    out = lines[0]
    for i, line in enumerate(lines[1:]):
        out += endings[i % len(endings)] + line
    return out


LATIN1 = (
    "# -*- coding: latin-1 -*-\n"
    "# café, naïve: every byte of this file is latin-1\n"
    "def f(ub_overlap_ag, is_grad_enabled, x):\n"
    "    ub_overlap_ag = (x != 'é') and ub_overlap_ag and is_grad_enabled  # déjà\n"
    "    return ub_overlap_ag\n"
).encode("latin-1")
UNICODE = (
    "def f(ub_overlap_ag, is_grad_enabled, x):\n"
    "    ub_overlap_ag = (x != '😀é') and ub_overlap_ag and is_grad_enabled\n"
).encode()
#: 100,000 lines: one in ten a statement, the others comments and blank lines
BIG_PREFIX = b"".join(
    (b"value_%d = compute(%d, key='k')\n" % (i, i))
    if i % 10 == 0
    else (b"# filler comment %d\n" % i if i % 3 else b"\n")
    for i in range(100_000)
)

VALID_INPUTS = [
    Valid("empty", b"", []),
    Valid("whitespace_only", b"\n\n   \n\t\n", []),
    Valid("bom_only", b"\xef\xbb\xbf", []),
    Valid("cookie_only", b"# -*- coding: latin-1 -*-\n", []),
    Valid("grad_token_in_comment_only", b"# is_grad_enabled\n", []),
    Valid("plain", BUGGY, [(2, 39)], BUGGY_FIXED),
    Valid("latin1_cookie", LATIN1, [(4, 54)], LATIN1.replace(b" and is_grad_enabled", b"")),
    Valid("utf8_non_ascii_columns", UNICODE, [(2, 55)], UNICODE.replace(b" and is_grad_enabled", b"")),
    Valid("utf8_bom", b"\xef\xbb\xbf" + BUGGY, [(2, 39)], b"\xef\xbb\xbf" + BUGGY_FIXED),
    Valid("utf8_bom_crlf", b"\xef\xbb\xbf" + _crlf(BUGGY), [(2, 39)], b"\xef\xbb\xbf" + _crlf(BUGGY_FIXED)),
    Valid("crlf", _crlf(BUGGY), [(2, 39)], _crlf(BUGGY_FIXED)),
    Valid("mixed_lf_crlf", _mixed(BUGGY, (b"\r\n", b"\n")), [(2, 39)], _mixed(BUGGY_FIXED, (b"\r\n", b"\n"))),
    Valid("mixed_crlf_lf", _mixed(BUGGY, (b"\n", b"\r\n")), [(2, 39)], _mixed(BUGGY_FIXED, (b"\n", b"\r\n"))),
    Valid(
        "mixed_with_lone_cr",
        _mixed(BUGGY, (b"\r\n", b"\r", b"\n")),
        [(2, 39)],
        _mixed(BUGGY_FIXED, (b"\r\n", b"\r", b"\n")),
    ),
    Valid(
        "lone_cr_top_level",
        b"ub_overlap_ag = ub_overlap_ag and is_grad_enabled and x\rx = 1\r",
        [(1, 35)],
        b"ub_overlap_ag = ub_overlap_ag and x\rx = 1\r",
    ),
    Valid("lone_cr_old_mac", BUGGY.replace(b"\n", b"\r"), [(2, 39)], BUGGY_FIXED.replace(b"\n", b"\r")),
    Valid("tabs", BUGGY.replace(b"    ", b"\t"), [(2, 36)], BUGGY_FIXED.replace(b"    ", b"\t")),
    Valid(
        "tabs_and_spaces",
        b"if 1:\n\tif 2:\n\t        ub_overlap_rs = ub_overlap_rs and is_grad_enabled and x\n",
        [(3, 44)],
        b"if 1:\n\tif 2:\n\t        ub_overlap_rs = ub_overlap_rs and x\n",
    ),
    Valid(
        "form_feed",
        # (a form feed in a statement's indentation: report only, test_reliability_v3)
        b"import torch\n\x0c\ndef f(ub_overlap_ag):\n\x0c\n    ub_overlap_ag = ub_overlap_ag and torch.is_grad_enabled() and x\n",
        [(5, 39)],
        b"import torch\n\x0c\ndef f(ub_overlap_ag):\n\x0c\n    ub_overlap_ag = ub_overlap_ag and x\n",
    ),
    Valid("no_final_newline", BUGGY.rstrip(b"\n"), [(2, 39)], BUGGY_FIXED.rstrip(b"\n")),
    Valid(
        "no_final_newline_on_finding",
        b"x = 1\r\nub_overlap_ag = ub_overlap_ag and is_grad_enabled and x",
        [(2, 35)],
        b"x = 1\r\nub_overlap_ag = ub_overlap_ag and x",
    ),
    Valid(
        "trailing_whitespace_and_backslash",
        b"ub_overlap_ag = ub_overlap_ag \\\n    and is_grad_enabled and x   \n",
        [(2, 9)],
        b"ub_overlap_ag = ub_overlap_ag and x   \n",
    ),
    Valid(
        "blank_lines_at_eof_without_newline",
        b"if a: pass\nelse: ub_overlap_ag = ub_overlap_ag and is_grad_enabled and x\n\n  \n\t",
        [(2, 41)],
        b"if a: pass\nelse: ub_overlap_ag = ub_overlap_ag and x\n\n  \n\t",
    ),
    Valid("clean_100k_lines", BIG_PREFIX, []),
    Valid("hundred_k_lines", BIG_PREFIX + BUGGY, [(100_002, 39)], BIG_PREFIX + BUGGY_FIXED),
]


@pytest.mark.parametrize("case", VALID_INPUTS, ids=lambda c: c.name)
def test_valid_input_check(tmp_path, case):
    (tmp_path / "m.py").write_bytes(case.data)
    result = cli("check", "--format", "json", "m.py", cwd=tmp_path)
    assert result.stderr == b"", result.stderr.decode()
    assert result.returncode == (1 if case.findings else 0)
    assert [(f["line"], f["column"]) for f in json.loads(result.stdout)] == case.findings


@pytest.mark.parametrize("case", VALID_INPUTS, ids=lambda c: c.name)
def test_valid_input_fix(tmp_path, case):
    path = tmp_path / "m.py"
    path.write_bytes(case.data)
    path.chmod(0o640)
    inode = os.stat(path).st_ino
    result = cli("fix", "m.py", cwd=tmp_path)
    assert _errors(result.stderr) == {}
    assert result.returncode == 0
    expected = case.fixed if case.fixed is not None else case.data
    assert path.read_bytes() == expected
    assert os.stat(path).st_mode & 0o7777 == 0o640
    if case.fixed is None:
        assert os.stat(path).st_ino == inode, "an unchanged file was rewritten"
    again = cli("check", "m.py", cwd=tmp_path)
    assert again.returncode == 0, again.stdout.decode()


LONG_CHAIN = b"ub_overlap_ag = " + b" and ".join([b"a"] * 1000) + b" and is_grad_enabled\n"


@pytest.mark.parametrize("command", ["check", "fix"])
def test_very_long_and_chain_never_crashes(tmp_path, command):
    """CPython compiles a 1,000-operand ``and`` chain; gradgate must either analyse it
    (the finding at 1:5011) or refuse it with one ``error:`` line, and go on with the
    other files; never a traceback."""
    _good_tree(tmp_path)
    (tmp_path / "long.py").write_bytes(LONG_CHAIN)
    result = run_cli(command, "--format", "json", ".", cwd=tmp_path)
    assert b"Traceback" not in result.stderr, result.stderr.decode()[-600:]
    errors = _errors(result.stderr)
    findings = json.loads(result.stdout)
    if errors:
        assert result.returncode == 2 and list(errors) == [os.path.join("long.py")]
    else:
        long = [(f["line"], f["column"]) for f in findings if f["path"].endswith("long.py")]
        assert long == ([(1, len(LONG_CHAIN) - len("is_grad_enabled\n") + 1)] if command == "check" else [])
    if command == "check":
        assert [
            (p.removeprefix("./"), line, c) for p, line, c in _good_paths(findings) if not p.endswith("long.py")
        ] == GOOD_FINDINGS


@pytest.mark.parametrize(
    "data, encoding",
    [
        (b"#!/usr/bin/env python\r# -*- coding: latin-1 -*-\rx = '\xe9'\r" * 1, "iso-8859-1"),  # lone CRs
        (b"#" + b"x" * 5000 + b"\n# coding: cp1252\nx = '\x80'\n", "cp1252"),  # a first line past 4 kB
        (b"x = 1\n" * 50_000 + b"# coding: latin-1\n", "utf-8"),  # a cookie below line 2 is no cookie
        (b"\xef\xbb\xbfx = 1\n", "utf-8-sig"),
    ],
)
def test_the_encoding_is_read_from_the_first_two_lines_only(data, encoding):
    from gradgate.source import decode_check

    assert decode_check(data) == encoding
