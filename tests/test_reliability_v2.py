"""Issue 12 (Reliability v2) and issue 13 (Performance v2), the run/IO layer: discovery
that stays in its roots, writes that keep owner and bytes, a cache nobody can poison,
output nobody can forge, no traceback on crafted inputs, workers that die with their
parent, and a warm run that reads no file content.

Each test reproduces a defect of the issue and states the exact outcome (bytes, exit
code, message) that the fix gives.
"""

from __future__ import annotations

import json
import marshal
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from conftest import ROOT, run_cli

from gradgate import cache as cache_module
from gradgate import source as source_module
from gradgate.config import Config, ConfigError
from gradgate.discovery import Discovered, discover
from gradgate.runner import RunOptions, run
from gradgate.source import SourceError, write_atomic

BUGGY = (
    "import torch\n\n\n"
    "def forward(x, ub_overlap_ag):\n"
    "    ub_overlap_ag = ub_overlap_ag and torch.is_grad_enabled() and x\n"
    "    return ub_overlap_ag\n"
)
FIXED = BUGGY.replace(" and torch.is_grad_enabled()", "")
MESSAGE = (
    "GG001 forward communication flag `ub_overlap_ag` is gated on grad mode "
    "(`torch.is_grad_enabled()`): under torch.no_grad() the requested path is silently dropped"
)
FORGED = "y\n::error file=README.md,line=1::forged\n.py"


def lines(data: bytes) -> list[str]:
    return data.decode("utf-8", "surrogateescape").splitlines()


def old(path: Path) -> None:
    """Give ``path`` a modification time well in the past (not "racily clean")."""
    os.utime(path, (time.time() - 3600, time.time() - 3600))


# -- 1. discovery never leaves the given roots -----------------------------------------------
@pytest.fixture
def linked_tree(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "o.py").write_text(BUGGY)
    tree = tmp_path / "tree"
    (tree / "sub").mkdir(parents=True)
    (tree / "a.py").write_text(BUGGY)
    (tree / "sub" / "s.py").write_text("x = 1\n")
    os.symlink("../outside/o.py", tree / "link.py")
    os.symlink("../outside", tree / "outdir")
    # never a link to "/" here: a gradgate that follows it would fix files all over the
    # machine (this fixture's first version did, with the old discovery)
    os.symlink("a.py", tree / "alias.py")
    os.symlink("sub", tree / "sublink")
    return tmp_path


def test_discovery_skips_links_out_of_the_root_and_takes_each_file_once(linked_tree, monkeypatch):
    monkeypatch.chdir(linked_tree)
    assert list(discover(["tree"])) == [
        Discovered("tree/a.py"),
        Discovered("tree/link.py", skipped="symbolic link to a file outside the checked tree"),
        Discovered("tree/outdir", skipped="symbolic link to a folder outside the checked tree"),
        Discovered("tree/sub/s.py"),
    ]
    # an explicit file is taken; the same file twice (a link and its target) once, by its name
    assert list(discover(["tree/alias.py", "tree/a.py", "tree/link.py"])) == [
        Discovered("tree/a.py"),
        Discovered("tree/link.py"),
    ]


def test_fix_never_writes_through_a_link_out_of_the_tree(linked_tree):
    result = run_cli("fix", "--no-cache", "tree", cwd=linked_tree)
    assert result.returncode == 0, result.stderr
    assert (linked_tree / "outside" / "o.py").read_text() == BUGGY
    assert (linked_tree / "tree" / "a.py").read_text() == FIXED
    assert lines(result.stderr) == [
        "warning: tree/link.py: symbolic link to a file outside the checked tree: not checked",
        "warning: tree/outdir: symbolic link to a folder outside the checked tree: not checked",
        "Fixed 1 finding in tree/a.py",  # once: the alias is the same file, no "changed on disk"
        "Fixed 1 finding in 1 file; 0 left.",
    ]


def test_a_link_to_the_file_system_root_is_not_walked(tmp_path, monkeypatch):
    # discovery only, never `fix`: a discovery that followed the link would list the machine
    (tmp_path / "a.py").write_text(BUGGY)
    os.symlink("/", tmp_path / "root")
    monkeypatch.chdir(tmp_path)
    walked = []
    for item in discover(["."]):
        walked.append(item)
        assert len(walked) < 10, walked
    assert walked == [
        Discovered("./a.py"),
        Discovered("./root", skipped="symbolic link to a folder outside the checked tree"),
    ]


# -- 2. writes keep owner, group and mode --------------------------------------------------------
@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="needs root")
def test_fix_as_root_keeps_owner_group_and_mode(tmp_path):
    import grp
    import pwd

    uid = pwd.getpwnam("nobody").pw_uid
    gid = grp.getgrnam("nogroup").gr_gid if "nogroup" in {g.gr_name for g in grp.getgrall()} else uid
    path = tmp_path / "m.py"
    path.write_text(BUGGY)
    os.chown(path, uid, gid)
    os.chmod(path, 0o640)
    result = run_cli("fix", "--no-cache", str(path))
    assert result.returncode == 0, result.stderr
    info = os.stat(path)
    assert (info.st_uid, info.st_gid, info.st_mode & 0o7777) == (uid, gid, 0o640)
    assert path.read_text() == FIXED


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="needs root")
def test_a_write_that_cannot_keep_the_owner_is_refused(tmp_path):
    import pwd
    import tempfile

    nobody = pwd.getpwnam("nobody")
    # a folder nobody can reach and write (pytest's own are root's, 0700)
    tmp_path = Path(tempfile.mkdtemp(dir="/tmp" if os.path.isdir("/tmp") else None))
    os.chmod(tmp_path, 0o777)  # nobody may make the temporary file here, not give it to root
    path = tmp_path / "m.py"
    path.write_text(BUGGY)
    os.chmod(path, 0o666)
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # as nobody, over a file of root's
        os.close(read)
        os.setgid(nobody.pw_gid)
        os.setuid(nobody.pw_uid)
        try:
            write_atomic(str(path), BUGGY.encode(), FIXED.encode())
            os.write(write, b"written")
        except SourceError as exc:
            os.write(write, str(exc).encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        said = pipe.read().decode()
    os.waitpid(child, 0)
    assert said == "cannot keep the file's owner and group (0:0); not overwritten"
    assert path.read_text() == BUGGY
    assert (os.stat(path).st_uid, sorted(p.name for p in tmp_path.iterdir())) == (0, ["m.py"])
    path.unlink()
    tmp_path.rmdir()


# -- 3. fixes change only the bytes of the edit -----------------------------------------------
@pytest.mark.parametrize(
    "encoding, original, expected",
    [
        # cp932: 0x8790 (NEC row 13) decodes to U+2252, which re-encodes as 0x81E0 (JIS)
        (
            "cp932",
            b"# coding: cp932\n# \x87\x90\nx = a and b  # \x87\x90\ny = 1  # \x87\x90\n",
            b"# coding: cp932\n# \x87\x90\nx = a  # \x87\x90\ny = 1  # \x87\x90\n",
        ),
        # big5: 0xA2CC decodes to U+5341, which re-encodes as 0xA451;
        # cp950: 0xF9F9 decodes to U+2550, which re-encodes as 0xA2A4
        (
            "big5",
            b"# coding: big5\n# \xa2\xcc\nx = a and b  # \xa2\xcc\n",
            b"# coding: big5\n# \xa2\xcc\nx = a  # \xa2\xcc\n",
        ),
        (
            "cp950",
            b"# coding: cp950\n# \xf9\xf9\nx = a and b  # \xf9\xf9\n",
            b"# coding: cp950\n# \xf9\xf9\nx = a  # \xf9\xf9\n",
        ),
        # utf-7: an optional direct character written shifted stays shifted
        ("utf-7", b"# coding: utf-7\n# +ACE-\nx = a and b  # +ACE-\n", b"# coding: utf-7\n# +ACE-\nx = a  # +ACE-\n"),
        # utf-7, an edit inside a shifted run: the spliced bytes still decode to the fixed text
        ("utf-7", b"# coding: utf-7\n# +AOk-\nx = 1  # +AOkA6QDp-\n", b"# coding: utf-7\n# +AOk-\nx = 1  # +AOk-\n"),
    ],
)
def test_encode_fixed_keeps_the_bytes_outside_the_edit(encoding, original, expected):
    text = original.decode(encoding)
    fixed_text = text.replace("a and b", "a").replace("\xe9\xe9\xe9", "\xe9")
    assert source_module.encode_fixed(original, text, fixed_text, encoding) == expected
    assert expected.decode(encoding) == fixed_text


def test_encode_fixed_differs_from_encoding_the_whole_text():
    original = b"# coding: cp932\n# \x87\x90\nx = a and b\n"
    text = original.decode("cp932")
    assert text.replace("a and b", "a").encode("cp932") == b"# coding: cp932\n# \x81\xe0\nx = a\n"
    assert source_module.encode_fixed(original, text, text.replace("a and b", "a"), "cp932") == (
        b"# coding: cp932\n# \x87\x90\nx = a\n"
    )


def test_encode_fixed_of_a_large_file_with_a_bom_and_no_change():
    body = "x = 1\n" * 50_000
    original = b"\xef\xbb\xbf" + body.encode()
    assert source_module.encode_fixed(original, body, body + "y = 2\n", "utf-8-sig") == original + b"y = 2\n"
    cp = ("# coding: cp932\n# \u221f\n" + body).encode("cp932")
    text = cp.decode("cp932")
    assert source_module.encode_fixed(cp, text, text, "cp932") == cp


CP932_BUGGY = b"# -*- coding: cp932 -*-\n# \x87\x90\n" + BUGGY.encode().replace(
    b"is_grad_enabled() and x\n", b"is_grad_enabled() and x  # \x87\x90\n", 1
)
CP932_FIXED = b"# -*- coding: cp932 -*-\n# \x87\x90\n" + FIXED.encode().replace(
    b"ub_overlap_ag = ub_overlap_ag and x\n", b"ub_overlap_ag = ub_overlap_ag and x  # \x87\x90\n", 1
)


def test_fix_of_a_cp932_file_changes_only_the_edit(tmp_path):
    path = tmp_path / "m.py"
    path.write_bytes(CP932_BUGGY)
    result = run_cli("fix", "--no-cache", str(path))
    assert result.returncode == 0, result.stderr
    assert path.read_bytes() == CP932_FIXED


def test_fix_diff_is_in_the_files_encoding_and_git_applies(tmp_path):
    git = {"cwd": tmp_path, "capture_output": True, "check": True}
    subprocess.run(["git", "init", "-q"], **git)
    (tmp_path / "m.py").write_bytes(CP932_BUGGY)
    crlf = tmp_path / "crlf.py"
    crlf.write_bytes(BUGGY.replace("\n", "\r\n").encode().rstrip(b"\r\n"))
    result = run_cli("fix", "--diff", "--no-cache", ".", cwd=tmp_path)
    assert result.returncode == 1, result.stderr  # changes pending
    assert b"+    ub_overlap_ag = ub_overlap_ag and x  # \x87\x90\n" in result.stdout
    (tmp_path / "fix.patch").write_bytes(result.stdout)
    subprocess.run(["git", "apply", "fix.patch"], **git)
    assert (tmp_path / "m.py").read_bytes() == CP932_FIXED
    assert crlf.read_bytes() == FIXED.replace("\n", "\r\n").encode().rstrip(b"\r\n")


# -- 4. the harness never replaces what it did not make --------------------------------------------
def _fake_te(tmp_path: Path) -> Path:
    package = tmp_path / "site-packages" / "transformer_engine"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("x = 1\n")
    return package


def test_overlay_refuses_a_non_empty_folder_it_did_not_make(tmp_path):
    from gradgate.harness import overlay

    package = _fake_te(tmp_path)
    mine = tmp_path / "mine"
    (mine / "transformer_engine").mkdir(parents=True)
    (mine / "transformer_engine" / "thesis.tex").write_text("precious\n")
    with pytest.raises(overlay.OverlayError) as info:
        overlay.build_overlay(package, mine)
    assert str(info.value) == (
        f"overlay folder {mine} exists, is not empty and was not made by gradgate (no "
        ".gradgate-overlay in it); refusing to replace what is in it: choose a new or empty folder"
    )
    assert (mine / "transformer_engine" / "thesis.tex").read_text() == "precious\n"
    # a folder it made (new, or empty) is claimed with the marker and may be rebuilt
    built = overlay.build_overlay(package, tmp_path / "new")
    assert (tmp_path / "new" / ".gradgate-overlay").is_file() and built.copied == ["__init__.py"]
    assert overlay.build_overlay(package, tmp_path / "new").copied == ["__init__.py"]


@pytest.mark.parametrize("where", ["site-packages/ov", "site-packages/transformer_engine/ov", "site-packages"])
def test_overlay_refuses_the_installed_package_and_its_site_packages(tmp_path, where):
    from gradgate.harness import overlay

    package = _fake_te(tmp_path)
    with pytest.raises(overlay.OverlayError, match="would overwrite the installed package"):
        overlay.build_overlay(package, tmp_path / where)
    assert sorted(p.name for p in (tmp_path / "site-packages").rglob("*")) == ["__init__.py", "transformer_engine"]


def test_harness_command_refuses_a_foreign_overlay_dir_with_exit_2(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from gradgate.harness import cli as harness_cli
    from gradgate.harness import overlay

    package = _fake_te(tmp_path)
    monkeypatch.setattr(overlay, "locate_installed_package", lambda name="transformer_engine": package)
    precious = tmp_path / "home"
    precious.mkdir()
    (precious / "notes.txt").write_text("keep\n")
    result = CliRunner().invoke(
        harness_cli.harness,
        [
            "--te",
            "fixed",
            "--nproc-per-node",
            "2",
            "--no-perf",
            "--output",
            str(tmp_path / "out"),
            "--overlay-dir",
            str(precious),
        ],
    )
    assert result.exit_code == 2
    assert "cannot build the fixed TE overlay: overlay folder" in result.output
    assert sorted(p.name for p in precious.iterdir()) == ["notes.txt"]


# -- 6. the cache cannot change a result --------------------------------------------------------
def test_default_cache_dir_is_the_users(monkeypatch):
    monkeypatch.setenv("GRADGATE_CACHE_DIR", "/c/gg")
    assert cache_module.default_cache_dir() == "/c/gg"
    monkeypatch.delenv("GRADGATE_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", "/x")
    assert cache_module.default_cache_dir() == "/x/gradgate"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", "/home/u")
    assert cache_module.default_cache_dir() == "/home/u/.cache/gradgate"


def test_a_plain_check_writes_nothing_into_the_tree(tmp_path, monkeypatch):
    (tmp_path / "m.py").write_text(BUGGY)
    env_cache = tmp_path.parent / f"{tmp_path.name}-xdg"
    monkeypatch.setenv("XDG_CACHE_HOME", str(env_cache))
    monkeypatch.delenv("GRADGATE_CACHE_DIR", raising=False)
    assert run_cli("check", ".", cwd=tmp_path).returncode == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.py"]
    key = env_cache / "gradgate" / "secret.key"
    assert (os.stat(key).st_mode & 0o777, os.stat(env_cache / "gradgate").st_mode & 0o777) == (0o600, 0o700)
    assert len(key.read_bytes()) == 64


def _cache_file(tree: Path, cache_dir: Path) -> Path:
    (found,) = cache_dir.glob("results-*.marshal")
    return found


@pytest.mark.parametrize(
    "attack", ["unauthenticated", "other key", "format 2", "deep", "deep signed", "garbage", "other path"]
)
def test_a_planted_or_crafted_cache_is_ignored(tmp_path, attack):
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "m.py").write_text(BUGGY)
    cache_dir = tree / ".gradgate_cache"
    first = run_cli("check", "--cache-dir", str(cache_dir), "m.py", cwd=tree)
    assert first.returncode == 1
    target = _cache_file(tree, cache_dir)
    _header, _, body = target.read_bytes().partition(b"\n")
    entries = marshal.loads(body)["entries"]
    (abspath,) = entries
    clean = {**entries[abspath], "findings": []}
    key = cache_module.secret_key(create=False)
    assert key is not None

    head = b"gradgate-cache %d " % cache_module.FORMAT  # the current format: each attack gets past it

    def signed(body: bytes, with_key: bytes = key) -> bytes:
        return head + cache_module._mac(with_key, body) + b"\n" + body

    forged = marshal.dumps({"entries": {abspath: clean}})
    # {"entries": [[[...]]]} 100,000 lists deep: marshal's own dumps refuses to write it
    deep = marshal.dumps({"entries": None})[:-2] + b"[\x01\x00\x00\x00" * 100_000 + b"N0"
    target.write_bytes(
        {
            "unauthenticated": head + b"0" * 64 + b"\n" + forged,
            "other key": signed(forged, b"1" * 64),
            "format 2": json.dumps({"format": 2, "entries": {clean["digest"]: clean}}).encode(),
            "deep": deep,
            "deep signed": signed(deep),
            "garbage": b"\xff\x00" * 1000,
            # a genuine entry without findings, but for another file of the same content
            "other path": signed(marshal.dumps({"entries": {abspath + "x": clean}})),
        }[attack]
    )
    again = run_cli("check", "--cache-dir", str(cache_dir), "m.py", cwd=tree)
    assert (again.returncode, lines(again.stdout), again.stderr) == (
        1,
        [f"m.py:5:39: {MESSAGE}", "Found 1 finding (1 fixable with `gradgate fix`)."],
        b"",
    )


def test_the_cache_key_holds_python_and_libcst_versions(monkeypatch):
    config = Config()
    before = cache_module.validity_digest(config)
    monkeypatch.setattr(sys, "version", sys.version + " other")
    assert cache_module.validity_digest(config) != before
    monkeypatch.undo()
    monkeypatch.setattr(cache_module, "_libcst_stamp", lambda: "another libcst")
    assert cache_module.validity_digest(config) != before


def test_a_dangling_gitignore_link_in_the_cache_dir_is_left_alone(tmp_path):
    (tmp_path / "m.py").write_text(BUGGY)
    cache_dir = tmp_path / ".gradgate_cache"
    cache_dir.mkdir()
    os.symlink(tmp_path / "created-by-the-link", cache_dir / ".gitignore")
    result = run_cli("check", "--cache-dir", str(cache_dir), "m.py", cwd=tmp_path)
    assert result.returncode == 1
    assert not os.path.lexists(tmp_path / "created-by-the-link")
    assert os.readlink(cache_dir / ".gitignore") == str(tmp_path / "created-by-the-link")
    assert len(list(cache_dir.glob("results-*.marshal"))) == 1


# -- 13. a warm run over an unchanged tree reads no file content ------------------------------------
def _tree(tmp_path: Path) -> Path:
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "bug.py").write_text(BUGGY)
    (tree / "clean.py").write_text("import torch\n\nok = torch.is_grad_enabled()\n")
    (tree / "plain.py").write_text("x = 1\n")
    for path in tree.iterdir():
        old(path)
    return tree


def test_a_warm_run_reads_no_file_content(tmp_path, monkeypatch):
    import gradgate.runner as runner

    monkeypatch.setattr(cache_module, "RACY_NS", 0)  # utime() just set every ctime to now
    tree = _tree(tmp_path)
    options = RunOptions(cache_dir=str(tmp_path / "cache"))
    cold = [(r.path, r.stage, len(r.findings)) for r in run([str(tree)], Config(), options)]
    read = []
    real_read = runner.read_source
    monkeypatch.setattr(runner, "read_source", lambda path: read.append(path) or real_read(path))
    warm = [(r.path, r.stage, len(r.findings)) for r in run([str(tree)], Config(), options)]
    assert read == []
    assert cold == [(f"{tree}/bug.py", "ast", 1), (f"{tree}/clean.py", "ast", 0), (f"{tree}/plain.py", "prefilter", 0)]
    assert warm == [
        (f"{tree}/bug.py", "cache", 1),
        (f"{tree}/clean.py", "cache", 0),
        (f"{tree}/plain.py", "prefilter", 0),
    ]
    # a touched file is read and hashed (and found unchanged); an edited one is analysed again
    os.utime(tree / "clean.py")
    (tree / "bug.py").write_text(BUGGY.replace("ub_overlap_ag", "ub_overlap_rs"))
    old(tree / "bug.py")
    again = [(r.path, r.stage, len(r.findings)) for r in run([str(tree)], Config(), options)]
    assert sorted(read) == [f"{tree}/bug.py", f"{tree}/clean.py"]
    assert again == [
        (f"{tree}/bug.py", "ast", 1),
        (f"{tree}/clean.py", "cache", 0),
        (f"{tree}/plain.py", "prefilter", 0),
    ]


def test_a_file_the_prefilter_drops_is_cached_by_status_and_never_hashed(tmp_path, monkeypatch):
    """Its entry holds no digest: touched, it is scanned again rather than hashed; given a
    grad-mode read, it is analysed. An analysed file's entry keeps its digest."""
    monkeypatch.setattr(cache_module, "RACY_NS", 0)
    tree = _tree(tmp_path)
    options = RunOptions(cache_dir=str(tmp_path / "cache"))
    list(run([str(tree)], Config(), options))
    (cache_file,) = (tmp_path / "cache").glob("results-*.marshal")
    entries = marshal.loads(cache_file.read_bytes().partition(b"\n")[2])["entries"]
    assert entries[str(tree / "plain.py")]["digest"] is None
    assert entries[str(tree / "bug.py")]["digest"] == cache_module.content_key(BUGGY.encode())
    hashed = []
    real_key = cache_module.content_key
    monkeypatch.setattr(cache_module, "content_key", lambda data: hashed.append(data) or real_key(data))
    os.utime(tree / "plain.py")
    touched = [(os.path.basename(r.path), r.stage) for r in run([str(tree)], Config(), options)]
    assert touched == [("bug.py", "cache"), ("clean.py", "cache"), ("plain.py", "prefilter")]
    assert hashed == []
    (tree / "plain.py").write_text("import torch\n\nflag = torch.is_grad_enabled()\n")
    old(tree / "plain.py")
    edited = [(os.path.basename(r.path), r.stage) for r in run([str(tree)], Config(), options)]
    assert edited == [("bug.py", "cache"), ("clean.py", "cache"), ("plain.py", "ast")]


def test_a_file_modified_just_now_is_not_trusted_by_its_status(tmp_path, monkeypatch):
    monkeypatch.setattr(cache_module, "RACY_NS", 300_000_000)
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "old.py").write_text(BUGGY)
    time.sleep(0.4)
    (tree / "new.py").write_text(BUGGY)  # a write in the same clock tick could keep the status
    options = RunOptions(cache_dir=str(tmp_path / "cache"))
    assert [len(r.findings) for r in run([str(tree)], Config(), options)] == [1, 1]
    (cache_file,) = (tmp_path / "cache").glob("results-*.marshal")
    entries = marshal.loads(cache_file.read_bytes().partition(b"\n")[2])["entries"]
    assert entries[str(tree / "new.py")]["stat"] is None
    assert entries[str(tree / "old.py")]["stat"] == cache_module.stat_key(os.stat(tree / "old.py"))


def test_results_keep_bytes_only_of_files_with_findings(tmp_path):
    tree = _tree(tmp_path)
    results = {os.path.basename(r.path): r.source for r in run([str(tree)], Config(), RunOptions())}
    assert results == {"bug.py": BUGGY.encode(), "clean.py": None, "plain.py": None}


def test_workers_only_when_the_work_that_reaches_analysis_pays_for_them():
    from gradgate.runner import _workers

    options = RunOptions(jobs=8)
    assert _workers(options, [0.03] * 18) == 3  # TransformerEngine: 18 files, 0.5 s of work
    assert _workers(RunOptions(jobs=2), [0.03] * 18) == 2
    assert _workers(RunOptions(jobs=8, edits=True), [0.03] * 18) == 1  # each would import LibCST
    assert _workers(options, [0.011] * 12) == 1  # transformers: 12 files, 0.13 s
    assert _workers(options, [0.06] * 5) == 2  # a pre-commit batch of five TE modules
    assert _workers(options, [0.2] * 3) == 1  # fewer than PARALLEL_THRESHOLD files
    assert _workers(options, [0.03] * 200) == 8  # ~6 s of work
    assert _workers(RunOptions(jobs=8, fix=True), [0.03] * 200) == 4
    assert _workers(RunOptions(jobs=2), [0.03] * 2000) == 2


def test_the_work_of_a_file_is_told_by_its_size_and_the_grad_mode_reads_it_spells():
    """Two files of one size: the one that reads grad mode five times is expected to
    cost five reads more (interpreting the functions around them)."""
    from gradgate.runner import PARSE_BYTES_PER_S, SECONDS_PER_READ, analysis_seconds

    plain = b"x = 1\n" * 1000
    reading = b"torch.is_grad_enabled()\n" * 5
    reading += b"x" * (len(plain) - len(reading))
    assert analysis_seconds(plain, Config()) == len(plain) / PARSE_BYTES_PER_S
    assert analysis_seconds(reading, Config()) == len(plain) / PARSE_BYTES_PER_S + 5 * SECONDS_PER_READ


def test_workers_get_runs_of_consecutive_files_of_equal_bytes():
    """Each worker analyses consecutive files (a package's files share the modules they
    call: parsed once in one worker), about half the bytes each."""
    from gradgate.runner import _shares

    assert _shares([10] * 18, 2) == [range(0, 9), range(9, 18)]
    assert _shares([100, 1, 1, 1], 2) == [range(0, 1), range(1, 4)]
    assert _shares([1, 1, 1, 100], 2) == [range(0, 3), range(3, 4)]
    assert _shares([5] * 6, 3) == [range(0, 2), range(2, 4), range(4, 6)]
    assert _shares([3, 1, 1, 1, 1, 1, 1, 1, 1, 1], 2) == [range(0, 4), range(4, 10)]
    assert _shares([0, 0, 0], 2) == [range(0, 3)]
    assert _shares([1, 1], 4) == [range(0, 1), range(1, 2)]


# -- 7. what comes from a file name or the source is escaped ---------------------------------------
@pytest.fixture
def forged_tree(tmp_path):
    (tmp_path / FORGED).write_text(BUGGY)
    (tmp_path / "b\udcff.py").write_text(BUGGY)  # a name that is not UTF-8
    (tmp_path / "bad\x1b[2J.py").write_bytes(b"x = '\xff'\n")  # an error, named with an escape
    return tmp_path


def test_text_output_and_stderr_escape_names(forged_tree):
    result = run_cli("check", "--no-cache", ".", cwd=forged_tree)
    assert result.returncode == 2
    assert lines(result.stdout) == [
        f"b\\xff.py:5:39: {MESSAGE}",
        f"y\\n::error file=README.md,line=1::forged\\n.py:5:39: {MESSAGE}",
        "Found 2 findings (2 fixable with `gradgate fix`). 1 file could not be checked.",
    ]
    assert lines(result.stderr) == ["error: bad\\x1b[2J.py: cannot decode as utf-8: byte 0xff at offset 5"]


def test_github_annotations_cannot_be_forged(forged_tree):
    result = run_cli("check", "--no-cache", "--format", "github", ".", cwd=forged_tree)
    assert result.returncode == 2
    out = lines(result.stdout)
    assert [line for line in out if line.startswith("::error file=README.md")] == []
    assert out[2] == (
        "::error file=y%0A%3A%3Aerror file=README.md%2Cline=1%3A%3Aforged%0A.py,"
        "line=5,col=39,endLine=5,endColumn=62,title=gradgate GG001::" + MESSAGE
    )
    assert out[1].startswith("::error file=b\\xff.py,line=5,")


def test_sarif_and_json_take_non_utf8_names(forged_tree):
    result = run_cli("check", "--no-cache", "--format", "sarif", ".", cwd=forged_tree)
    assert result.returncode == 2, result.stderr
    sarif = json.loads(result.stdout)
    uris = [r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for r in sarif["runs"][0]["results"]]
    assert uris == ["b%FF.py", "y%0A%3A%3Aerror%20file%3DREADME.md%2Cline%3D1%3A%3Aforged%0A.py"]
    (note,) = sarif["runs"][0]["invocations"][0]["toolExecutionNotifications"]
    assert note["message"]["text"] == "bad\\x1b[2J.py: cannot decode as utf-8: byte 0xff at offset 5"
    assert note["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "bad%1B%5B2J.py"
    as_json = run_cli("check", "--no-cache", "--format", "json", ".", cwd=forged_tree)
    assert [f["path"] for f in json.loads(as_json.stdout)] == ["b\\xff.py", FORGED]


def test_escape_functions():
    from gradgate.escape import display, git_path, github_data, github_property

    assert display("a\nb\rc\td\x1b\u202ee\udcff.py") == "a\\nb\\rc\\td\\x1b\\u202ee\\xff.py"
    assert display("\tx", keep_tabs=True) == "\tx"
    assert display("caf\u00e9.py") == "caf\u00e9.py"
    assert github_data("50%\r\n") == "50%25%0D%0A"
    assert github_property("a:b,c%") == "a%3Ab%2Cc%25"
    assert git_path(b"a/", 'x\ny"z.py') == b'"a/x\\ny\\"z.py"'
    assert git_path(b"a/", "caf\u00e9.py") == "a/caf\u00e9.py".encode()


# -- 10. no traceback on crafted inputs -----------------------------------------------------------
def test_baseline_with_infinite_count_is_a_clear_error(tmp_path):
    (tmp_path / "m.py").write_text(BUGGY)
    (tmp_path / "b.json").write_text(
        '{"format": 1, "findings": [{"rule": "GG001", "fingerprint": "x", "count": Infinity}]}'
    )
    result = run_cli("check", "--no-cache", "--baseline", "b.json", "m.py", cwd=tmp_path)
    assert result.returncode == 2
    assert lines(result.stderr)[-1] == "Error: b.json: not a gradgate baseline (invalid JSON: Infinity is not a count)"
    for bad in (
        '{"format": 1, "findings": [{"rule": "GG001", "fingerprint": "x", "count": 1e400}]}',
        '{"format": 1, "findings": [{"rule": "GG001", "fingerprint": "x", "count": true}]}',
        '{"format": 1, "findings": ' + "[" * 100_000 + "]" * 100_000 + "}",
    ):
        (tmp_path / "b.json").write_text(bad)
        result = run_cli("check", "--no-cache", "--baseline", "b.json", "m.py", cwd=tmp_path)
        assert result.returncode == 2 and b"Traceback" not in result.stderr
        assert lines(result.stderr)[-1].startswith("Error: b.json: ")


def test_write_baseline_into_a_missing_folder_is_a_clear_error(tmp_path):
    (tmp_path / "m.py").write_text(BUGGY)
    result = run_cli("check", "--no-cache", "--write-baseline", "/nonexistent/b.json", "m.py", cwd=tmp_path)
    assert result.returncode == 2
    assert lines(result.stderr)[-1] == "Error: cannot write baseline /nonexistent/b.json: No such file or directory"


# -- 11. bounded resources --------------------------------------------------------------------------
@pytest.mark.parametrize("pattern", ["^(a+)+$", "(a*)*", r"(\w+\s?)+$", "(x(a{1,3}))*"])
def test_nested_quantifiers_are_a_config_error(tmp_path, pattern):
    (tmp_path / "pyproject.toml").write_text(f"[tool.gradgate]\ncomm-flag-patterns = [{json.dumps(pattern)}]\n")
    (tmp_path / "m.py").write_text(BUGGY)
    result = run_cli("check", "--no-cache", "m.py", cwd=tmp_path)
    assert result.returncode == 2
    assert lines(result.stderr)[-1] == (
        f"Error: {tmp_path / 'pyproject.toml'}: regular expression {pattern!r} refused: a repetition inside a repetition "
        "(like `(a+)+`) can take exponential time; write it without the nested quantifier"
    )


@pytest.mark.parametrize("pattern", ["^my_overlap_", "(?:ag|rs)+_x", "a+b*", "(?>a+)+", "(a++)+"])
def test_linear_patterns_are_accepted(pattern):
    assert Config(comm_flag_patterns=(pattern,)).comm_flag_patterns == (pattern,)


def test_default_patterns_pass_the_check_a_default_config_skips():
    from gradgate import config as config_module

    defaults = (
        *config_module.DEFAULT_COMM_FLAG_PATTERNS,
        *config_module.DEFAULT_BACKWARD_FLAG_PATTERNS,
        *config_module.DEFAULT_COMM_CALL_PATTERNS,
        *config_module.DEFAULT_NON_FORWARD_FUNCTIONS,
    )
    assert [config_module.check_pattern(p) for p in defaults] == [None] * len(defaults)
    assert set(defaults) <= config_module._CHECKED_PATTERNS


def test_a_refused_pattern_stays_refused_when_asked_again():
    for _ in range(2):
        with pytest.raises(ConfigError, match=r"refused: a repetition inside a repetition"):
            Config(comm_flag_patterns=("(a*)*",))


PARENT = textwrap.dedent("""
    import os, sys, time
    import gradgate.runner as runner
    from gradgate.config import Config

    pids = sys.argv[2]

    def slow(job):
        open(os.path.join(pids, str(os.getpid())), "w").close()
        time.sleep(120)

    runner._analyse = slow                      # inherited by the forked children
    runner._workers = lambda options, sizes: 2
    for result in runner.run([sys.argv[1]], Config(), runner.RunOptions(jobs=2)):
        pass
""")


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_workers_die_with_their_parent(tmp_path, sig):
    """The processes that analyse a share (forked children; a pool where the run cannot
    fork) end when the run that started them is killed."""
    tree = tmp_path / "tree"
    tree.mkdir()
    for i in range(10):
        (tree / f"m{i}.py").write_text(BUGGY)
    pids = tmp_path / "pids"
    pids.mkdir()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    parent = subprocess.Popen([sys.executable, "-c", PARENT, str(tree), str(pids)], env=env)
    deadline = time.monotonic() + 60
    while len(list(pids.iterdir())) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    workers = [int(p.name) for p in pids.iterdir()]
    assert len(workers) == 2
    parent.send_signal(sig)
    parent.wait(timeout=30)

    def alive(pid: int) -> bool:
        try:
            with open(f"/proc/{pid}/stat") as handle:
                return handle.read().split(") ")[-1][0] != "Z"
        except FileNotFoundError:
            return False

    deadline = time.monotonic() + 10
    while any(alive(pid) for pid in workers) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert [pid for pid in workers if alive(pid)] == []
