#!/usr/bin/env python3
"""Benchmark gradgate against ruff, Fixit, a bare LibCST parse and grep on real corpora.

One run does all of this and prints a Markdown report (``--json OUT`` also writes every
raw number):

1. **Corpora** from PyPI, pinned (``pip download --no-deps``, unpacked under ``--cache``):
   TransformerEngine 2.20.2 (``transformer_engine/``), megatron-core 0.16.1
   (``megatron/``), DeepSpeed 0.19.8 sdist (``deepspeed/``), nemo-toolkit 3.0.0
   (``nemo/``). The files are the ``*.py`` files under the import dir, found the way
   gradgate finds them; the script checks that ruff sees the same set.
2. **Per corpus**, every command in a fresh process, wall time from ``fork`` to ``wait4``:
   ``gradgate check`` cold (``--cache-dir`` deleted before each run), warm (cache
   populated), ``--no-cache``, and ``--no-prefilter`` (once: it is slow); ``ruff check``
   with its default rules (no cache, and with a warm cache) and with
   ``--select ALL --output-format concise``; ``fixit lint`` (default rules); a bare
   ``libcst.parse_module`` of every file; ``grep -rl is_grad_enabled`` as the floor.
   Fast commands get one untimed warm-up run, then ``--runs`` timed runs interleaved
   round-robin (so background noise spreads over all of them), then one more run that
   samples the process tree's memory. Slow commands (Fixit, the LibCST parse,
   ``--no-prefilter``) run until ``--slow-budget`` seconds are spent, at least once.
3. **Single-file latency** on ``transformer_engine/pytorch/module/layernorm_mlp.py``.
4. **Scaling**: gradgate cold/warm and ruff on growing random subsets of the four corpora
   together, and a least-squares fit ``time = fixed + size / throughput``.
5. **Where gradgate spends time**: ``stages.py`` runs the engine in one process.
6. **Same findings**: every gradgate JSON output of a corpus (all cold, warm,
   ``--no-cache`` runs and the ``--no-prefilter`` run) must be identical.
7. **Goals** with PASS/FAIL, from the numbers above (TE corpus, same run).

Memory: "peak RSS" is ``ru_maxrss`` from ``wait4`` (the largest single process of the
command's tree); "tree PSS" is the largest sum of PSS over every process of the
command's session, sampled every 10 ms (every 50 ms during slow commands), which counts
worker processes together without counting pages they share with their parent twice.

Stdlib only. Tools are found in ``--ruff``/``--fixit`` if given, else next to this
Python, else in ``CACHE/tools-venv/bin`` (``--install-tools`` creates it with pip), else
on PATH; a missing tool is reported as "not installed", never fatal. gradgate is run as
``python -m gradgate`` with this checkout first on ``PYTHONPATH``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import random
import re
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
import zipfile
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
SINGLE_FILE = "transformer_engine/pytorch/module/layernorm_mlp.py"
GREP_TOKEN = "is_grad_enabled"
#: folders gradgate's discovery skips (gradgate/discovery.py), plus ``*.egg-info``
EXCLUDED_DIRS = frozenset(
    {
        ".git",
        ".hg",
        ".svn",
        ".tox",
        ".nox",
        ".venv",
        "venv",
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
        "__pycache__",
        "node_modules",
        "site-packages",
        ".eggs",
        ".gradgate_cache",
    }
)
MB = 1_000_000  # sizes and throughput: MB = 10^6 bytes; memory: MiB = 2^20 bytes
MIB = 1 << 20

PARSE_SCRIPT = """\
import sys, libcst
ok = failed = 0
for path in open(sys.argv[1], encoding="utf-8").read().splitlines():
    with open(path, "rb") as handle:
        data = handle.read()
    try:
        libcst.parse_module(data)
        ok += 1
    except Exception as exc:
        failed += 1
        print("failed:", path, type(exc).__name__, file=sys.stderr)
print(f"parsed {ok} files, {failed} failed")
"""


@dataclass(frozen=True)
class Corpus:
    key: str
    dist_name: str
    version: str
    dist: str  # wheel | sdist | any
    import_dir: str


CORPORA = (
    Corpus("te", "transformer-engine", "2.20.2", "wheel", "transformer_engine"),
    Corpus("megatron", "megatron-core", "0.16.1", "any", "megatron"),
    Corpus("deepspeed", "deepspeed", "0.19.8", "sdist", "deepspeed"),
    Corpus("nemo", "nemo-toolkit", "3.0.0", "wheel", "nemo"),
)


# ----------------------------------------------------------------------- measuring
@dataclass
class RunRecord:
    wall_s: float
    rc: int | None
    cpu_s: float
    maxrss_bytes: int
    timed_out: bool = False
    tree_pss_bytes: int | None = None
    tree_rss_bytes: int | None = None
    stdout: str = ""  # path of the captured stdout


class TreeSampler(threading.Thread):
    """Samples the summed PSS and RSS of every process in one session."""

    def __init__(self, session: int, interval: float) -> None:
        super().__init__(daemon=True)
        self.session = session
        self.interval = interval
        self.stop_event = threading.Event()
        self.pss = 0
        self.rss = 0
        self.page = os.sysconf("SC_PAGE_SIZE")

    def sample(self) -> None:
        pss = rss = 0
        try:
            entries = os.listdir("/proc")
        except OSError:
            return
        for name in entries:
            if not name.isdigit():
                continue
            try:
                with open(f"/proc/{name}/stat", "rb") as handle:
                    stat = handle.read()
                fields = stat[stat.rfind(b")") + 2 :].split()
                if int(fields[3]) != self.session:  # field 6: session id
                    continue
                rss += int(fields[21]) * self.page  # field 24: rss in pages
                with open(f"/proc/{name}/smaps_rollup", "rb") as handle:
                    for line in handle:
                        if line.startswith(b"Pss:"):
                            pss += int(line.split()[1]) * 1024
                            break
            except (OSError, ValueError, IndexError):
                continue
        self.pss = max(self.pss, pss)
        self.rss = max(self.rss, rss)

    def run(self) -> None:
        while not self.stop_event.is_set():
            self.sample()
            self.stop_event.wait(self.interval)

    def stop(self) -> None:
        self.stop_event.set()
        self.join()


def run_once(
    cmd: list[str], cwd: str, env: dict[str, str], timeout: float, out_path: str, sample: float | None = None
) -> RunRecord:
    """Run ``cmd`` once; wall time from just before fork to the return of wait4."""
    with open(out_path, "wb") as out, open(out_path + ".err", "wb") as err:
        sampler = None
        killed = threading.Event()
        start = time.perf_counter()
        proc = subprocess.Popen(
            cmd, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=err, start_new_session=True
        )

        def kill() -> None:
            killed.set()
            try:
                os.killpg(proc.pid, signal.SIGKILL)  # the session this command started
            except OSError:
                pass

        timer = threading.Timer(timeout, kill)
        timer.daemon = True
        timer.start()
        if sample:
            sampler = TreeSampler(proc.pid, sample)
            sampler.start()
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        timer.cancel()
        proc.returncode = os.waitstatus_to_exitcode(status)
        if sampler is not None:
            sampler.stop()
        if killed.is_set():
            try:
                os.killpg(proc.pid, signal.SIGKILL)  # leftovers of a timed-out command
            except OSError:
                pass
    return RunRecord(
        wall_s=wall,
        rc=proc.returncode,
        cpu_s=usage.ru_utime + usage.ru_stime,
        maxrss_bytes=usage.ru_maxrss * 1024,
        timed_out=killed.is_set(),
        tree_pss_bytes=sampler.pss if sampler else None,
        tree_rss_bytes=sampler.rss if sampler else None,
        stdout=out_path,
    )


@dataclass
class Tool:
    key: str
    label: str
    cmd: list[str] | None  # None: not available (see ``missing``)
    cwd: str = "."
    env: dict[str, str] | None = None
    ok_rc: tuple[int, ...] = (0, 1)
    slow: bool = False
    once: bool = False  # exactly one run (the --no-prefilter comparison)
    before: Callable[[], None] | None = None  # untimed, before every run
    missing: str = ""
    note: str = ""
    group: str = ""  # "gradgate": its JSON outputs are compared


@dataclass
class Result:
    key: str
    label: str
    command: str
    runs: list[RunRecord] = field(default_factory=list)
    mem_run: RunRecord | None = None
    timeouts: list[RunRecord] = field(default_factory=list)  # runs killed at --timeout
    missing: str = ""
    note: str = ""
    failed: str = ""  # why a run failed (bad exit status, timeout)

    @property
    def walls(self) -> list[float]:
        return [r.wall_s for r in self.runs]

    @property
    def ok(self) -> bool:
        return bool(self.runs) and not self.missing and not self.failed

    @property
    def median(self) -> float | None:
        return statistics.median(self.walls) if self.ok else None

    @property
    def minimum(self) -> float | None:
        return min(self.walls) if self.ok else None

    @property
    def cpu(self) -> float | None:
        return statistics.median(r.cpu_s for r in self.runs) if self.ok else None

    @property
    def records(self) -> list[RunRecord]:
        return self.runs + ([self.mem_run] if self.mem_run else []) + self.timeouts

    @property
    def maxrss(self) -> int | None:
        records = self.records
        return max(r.maxrss_bytes for r in records) if records and not self.missing else None

    @property
    def tree_pss(self) -> int | None:
        records = self.records
        values = [r.tree_pss_bytes for r in records if r.tree_pss_bytes is not None]
        return max(values) if values else None

    @property
    def peak(self) -> int | None:
        """The larger of the exact single-process peak and the sampled tree peak."""
        values = [v for v in (self.maxrss, self.tree_pss) if v is not None]
        return max(values) if values else None

    def as_dict(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "command": self.command,
            "missing": self.missing,
            "note": self.note,
            "failed": self.failed,
            "median_s": self.median,
            "min_s": self.minimum,
            "median_cpu_s": self.cpu,
            "peak_rss_bytes": self.maxrss,
            "tree_pss_bytes": self.tree_pss,
            "runs": [asdict(r) for r in self.runs],
            "memory_run": asdict(self.mem_run) if self.mem_run else None,
            "timeouts": [asdict(r) for r in self.timeouts],
        }

    @classmethod
    def from_dict(cls, key: str, data: dict[str, Any]) -> Result:
        def record(d: dict[str, Any]) -> RunRecord:
            return RunRecord(**{k: v for k, v in d.items() if k in RunRecord.__dataclass_fields__})

        return cls(
            key,
            data["label"],
            data.get("command", ""),
            runs=[record(r) for r in data.get("runs", [])],
            mem_run=record(data["memory_run"]) if data.get("memory_run") else None,
            timeouts=[record(r) for r in data.get("timeouts", [])],
            missing=data.get("missing", ""),
            note=data.get("note", ""),
            failed=data.get("failed", ""),
        )


class CpuMeter:
    """CPU time the rest of the machine used while we measured (a noise indicator).

    Busy time from ``/proc/stat`` over the interval, minus the CPU time of our own
    children (``RUSAGE_CHILDREN``) and of this process.
    """

    def __init__(self) -> None:
        self.start = self._now()

    @staticmethod
    def _now() -> tuple[float, float, float] | None:
        try:
            with open("/proc/stat", encoding="ascii") as handle:
                values = [int(x) for x in handle.readline().split()[1:]]
        except (OSError, ValueError):
            return None
        ticks = os.sysconf("SC_CLK_TCK")
        busy = (sum(values[:8]) - values[3] - values[4]) / ticks  # all but idle and iowait
        import resource

        ours = sum(
            getattr(resource.getrusage(who), f)
            for who in (resource.RUSAGE_CHILDREN, resource.RUSAGE_SELF)
            for f in ("ru_utime", "ru_stime")
        )
        return busy, ours, time.perf_counter()

    def stop(self) -> dict[str, float] | None:
        end = self._now()
        if self.start is None or end is None:
            return None
        busy, ours, wall = (b - a for a, b in zip(self.start, end))
        other = max(0.0, busy - ours)
        cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
        return {
            "wall_s": wall,
            "busy_cpu_s": busy,
            "our_cpu_s": ours,
            "other_cpu_s": other,
            "other_share": other / (wall * cpus) if wall else 0.0,
        }


def fmt_noise(noise: dict[str, float] | None) -> str:
    if not noise:
        return "background CPU use: unknown"
    return (
        f"background CPU use by other processes during this section: {noise['other_cpu_s']:.1f} "
        f"CPU-s over {noise['wall_s']:.0f} s ({100 * noise['other_share']:.0f}% of the machine)"
    )


class Bench:
    def __init__(self, args: argparse.Namespace, scratch: Path) -> None:
        self.args = args
        self.scratch = scratch
        self.counter = 0
        self.log_start = time.perf_counter()

    def log(self, message: str) -> None:
        elapsed = time.perf_counter() - self.log_start
        print(f"[{elapsed:7.1f}s] {message}", file=sys.stderr, flush=True)

    def out_path(self, key: str) -> str:
        self.counter += 1
        return str(self.scratch / f"{self.counter:05d}-{key}.out")

    def _one(self, tool: Tool, result: Result, sample: float | None = None) -> RunRecord | None:
        if tool.before is not None:
            tool.before()
        env = tool.env or os.environ.copy()
        record = run_once(tool.cmd, tool.cwd, env, self.args.timeout, self.out_path(tool.key), sample=sample)
        if record.timed_out:
            result.failed = f"timed out after {self.args.timeout:g} s"
            result.timeouts.append(record)
        elif record.rc not in tool.ok_rc:
            tail = Path(record.stdout + ".err").read_text(errors="replace").strip()[-300:]
            result.failed = f"exit status {record.rc}: {tail}"
        return record

    def measure(self, tools: list[Tool]) -> dict[str, Result]:
        """Warm-up, interleaved timed rounds, a memory run; then the slow tools."""
        results: dict[str, Result] = {}
        for tool in tools:
            results[tool.key] = Result(
                tool.key,
                tool.label,
                shlex.join(tool.cmd) if tool.cmd else "",
                missing=tool.missing if tool.cmd is None else "",
                note=tool.note,
            )
        fast = [t for t in tools if t.cmd is not None and not t.slow and not t.once]
        slow = [t for t in tools if t.cmd is not None and (t.slow or t.once)]
        for tool in fast:  # warm-up: page cache, .pyc files, the warm caches
            self._one(tool, results[tool.key])
        for _ in range(self.args.runs):
            for tool in fast:
                result = results[tool.key]
                if result.failed:
                    continue
                record = self._one(tool, result)
                if record is not None and not record.timed_out:
                    result.runs.append(record)
        for tool in fast:
            result = results[tool.key]
            if not result.failed:
                result.mem_run = self._one(tool, result, sample=0.01)
        for tool in slow:
            result = results[tool.key]
            spent = 0.0
            while True:
                self.log(f"  {tool.label}: run {len(result.runs) + 1}")
                record = self._one(tool, result, sample=0.05)
                if result.failed:
                    break
                result.runs.append(record)
                spent += record.wall_s
                if tool.once or len(result.runs) >= self.args.runs:
                    break
                if spent + record.wall_s > self.args.slow_budget:
                    break
        return results


# ------------------------------------------------------------------------ corpora
def prepare_corpus(corpus: Corpus, cache: Path, log: Callable[[str], None]) -> tuple[Path, str]:
    """Download (once) and unpack (once); return the import dir and the archive name."""
    downloads = cache / "downloads" / f"{corpus.dist_name}-{corpus.version}"
    unpacked = cache / "src" / f"{corpus.dist_name}-{corpus.version}"
    marker = unpacked / ".unpacked"
    if not marker.exists():
        archives = sorted(p for p in downloads.glob("*") if p.is_file()) if downloads.exists() else []
        if not archives:
            downloads.mkdir(parents=True, exist_ok=True)
            cmd = [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--no-deps",
                "--quiet",
                "--disable-pip-version-check",
                "-d",
                str(downloads),
                f"{corpus.dist_name}=={corpus.version}",
            ]
            if corpus.dist == "wheel":
                cmd.append("--only-binary=:all:")
            elif corpus.dist == "sdist":
                cmd.append("--no-binary=:all:")
            log(f"downloading {corpus.dist_name}=={corpus.version}")
            subprocess.run(cmd, check=True)
            archives = sorted(p for p in downloads.glob("*") if p.is_file())
        archive = archives[0]
        shutil.rmtree(unpacked, ignore_errors=True)
        unpacked.mkdir(parents=True)
        if archive.name.endswith((".whl", ".zip")):
            with zipfile.ZipFile(archive) as handle:
                handle.extractall(unpacked)
        else:
            with tarfile.open(archive) as handle:
                try:
                    handle.extractall(unpacked, filter="data")
                except TypeError:  # Python without extraction filters
                    handle.extractall(unpacked)
        marker.write_text(archive.name)
    archive_name = marker.read_text().strip()
    candidates = [unpacked / corpus.import_dir, *sorted(unpacked.glob(f"*/{corpus.import_dir}"))]
    for candidate in candidates:  # a regular package first; megatron/ is a namespace package
        if (candidate / "__init__.py").is_file():
            return candidate, archive_name
    for candidate in candidates:
        if candidate.is_dir():
            return candidate, archive_name
    raise SystemExit(f"{corpus.import_dir}/ not found in {archive_name}")


def python_files(root: Path) -> list[str]:
    """``*.py`` under ``root`` as gradgate's discovery walks it (sorted, paths relative to root's parent)."""
    found = []
    base = root.parent
    for directory, dirnames, filenames in os.walk(root, followlinks=True):
        dirnames[:] = sorted(d for d in dirnames if d not in EXCLUDED_DIRS and not d.endswith(".egg-info"))
        for name in sorted(filenames):
            if name.endswith(".py"):
                found.append(os.path.relpath(os.path.join(directory, name), base))
    return found


# -------------------------------------------------------------------------- tools
def resolve_tool(name: str, override: str | None, cache: Path) -> str | None:
    if override:
        path = shutil.which(override)
        return path
    candidates = [Path(sys.executable).parent / name, cache / "tools-venv" / "bin" / name]
    for candidate in candidates:
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    found = shutil.which(name)
    if found and "/.pyenv/shims/" in found:  # a pyenv shim costs ~60 ms a call: use the real one
        try:
            real = subprocess.run(["pyenv", "which", name], capture_output=True, text=True, check=True).stdout.strip()
            if real:
                return real
        except (OSError, subprocess.CalledProcessError):
            return None  # the shim exists but no installed version provides the tool
    return found


def install_tools(cache: Path, log: Callable[[str], None]) -> None:
    venv = cache / "tools-venv"
    if not (venv / "bin" / "python").exists():
        log(f"creating {venv}")
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    log("installing ruff and fixit into the tools venv")
    subprocess.run(
        [
            str(venv / "bin" / "python"),
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "ruff",
            "fixit",
        ],
        check=True,
    )


def first_line(cmd: list[str], **kwargs: Any) -> str:
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False, **kwargs)
        return (done.stdout or done.stderr).strip().splitlines()[0]
    except (OSError, IndexError, subprocess.SubprocessError):
        return "unknown"


#: where the Python commands keep their bytecode (set by main from --cache)
PYCACHE_PREFIX: str | None = None
#: the folder put first on gradgate's PYTHONPATH (main sets it to a snapshot of the checkout)
GRADGATE_PATH: str = str(REPO)


def snapshot_gradgate(scratch: Path) -> tuple[str, str]:
    """Copy gradgate/ (and rules/, which the package maps to gradgate.rules) into scratch.

    The benchmark then runs one version of the code from start to end even while the
    checkout is being edited. Returns the folder for PYTHONPATH and a digest of the copy.
    """
    import hashlib

    target = scratch / "gradgate-src"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(REPO / "gradgate", target / "gradgate", ignore=ignore)
    if (REPO / "rules").is_dir() and not (target / "gradgate" / "rules").exists():
        shutil.copytree(REPO / "rules", target / "gradgate" / "rules", ignore=ignore)
    digest = hashlib.sha256()
    for path in sorted(target.rglob("*")):
        if path.is_file():
            digest.update(str(path.relative_to(target)).encode() + b"\0" + path.read_bytes())
    return str(target), digest.hexdigest()[:12]


def plain_env() -> dict[str, str]:
    """The environment of every command: no tool cache or bytecode settings inherited.

    ``PYTHONDONTWRITEBYTECODE`` is dropped so that Python commands run with compiled
    bytecode, as they do after a normal install (a sandbox that sets it would make
    gradgate recompile its own modules on every run; the single-file table has one row
    that keeps the inherited setting, to show what that costs).
    """
    env = os.environ.copy()
    for name in (
        "GRADGATE_CACHE_DIR",
        "RUFF_CACHE_DIR",
        "PYTHONPATH",
        "PYTHONDONTWRITEBYTECODE",
        "PYTHONPYCACHEPREFIX",
    ):
        env.pop(name, None)
    return env


def python_env() -> dict[str, str]:
    """For this interpreter's commands: bytecode in CACHE/pycache, never in the checkout."""
    env = plain_env()
    if PYCACHE_PREFIX:
        env["PYTHONPYCACHEPREFIX"] = PYCACHE_PREFIX
    return env


def gradgate_env(inherit: bool = False) -> dict[str, str]:
    env = os.environ.copy() if inherit else python_env()
    env.pop("GRADGATE_CACHE_DIR", None)
    env["PYTHONPATH"] = GRADGATE_PATH + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def gradgate_features(gradgate: list[str]) -> dict[str, bool]:
    """Which ``check`` flags this gradgate accepts (click rejects unknown ones before --help)."""
    features = {}
    for flag, probe in (
        ("no_cache", ["--no-cache"]),
        ("cache_dir", ["--cache-dir", "x"]),
        ("no_prefilter", ["--no-prefilter"]),
        ("format_json", ["--format", "json"]),
    ):
        done = subprocess.run(
            [*gradgate, "check", *probe, "--help"],
            capture_output=True,
            env=gradgate_env(),
            timeout=60,
            check=False,
            cwd=GRADGATE_PATH,
        )
        features[flag] = done.returncode == 0
    return features


@dataclass
class Toolbox:
    gradgate: list[str]
    features: dict[str, bool]
    ruff: str | None
    fixit: str | None
    python: str  # runs the bare LibCST parse
    grep: str | None
    versions: dict[str, str]


def make_toolbox(args: argparse.Namespace, cache: Path) -> Toolbox:
    gradgate = shlex.split(args.gradgate) if args.gradgate else [sys.executable, "-m", "gradgate"]
    features = gradgate_features(gradgate)
    ruff = resolve_tool("ruff", args.ruff, cache)
    fixit = resolve_tool("fixit", args.fixit, cache)
    grep = shutil.which("grep")
    versions = {
        "gradgate": first_line([*gradgate, "--version"], env=gradgate_env(), cwd=GRADGATE_PATH),
        "gradgate_commit": first_line(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"]),
        "gradgate_modified": "yes"
        if subprocess.run(
            ["git", "-C", str(REPO), "status", "--porcelain", "--", "gradgate", "rules", "pyproject.toml"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip()
        else "no",
        "python": sys.version.split()[0] + f" ({sys.executable})",
        "libcst": first_line([sys.executable, "-c", "import importlib.metadata as m; print(m.version('libcst'))"]),
        "ruff": first_line([ruff, "--version"]) if ruff else "not installed",
        "fixit": first_line([fixit, "--version"]) if fixit else "not installed",
        "grep": first_line([grep, "--version"]) if grep else "not installed",
    }
    if ruff:
        with tempfile.TemporaryDirectory() as empty:
            probe = Path(empty) / "x.py"
            probe.write_text("")
            for name, extra in (("ruff_default_rules", []), ("ruff_all_rules", ["--select", "ALL"])):
                done = subprocess.run(
                    [ruff, "check", "--isolated", *extra, "--show-settings", str(probe)],
                    capture_output=True,
                    text=True,
                    check=False,
                    env=plain_env(),
                )
                block = re.search(r"linter\.rules\.enabled = \[\n(.*?)\n\]", done.stdout, re.DOTALL)
                versions[name] = str(len(block.group(1).splitlines())) if block else "?"
    if fixit:
        fixit_python = Path(fixit).parent / "python"
        if fixit_python.exists():
            versions["fixit_libcst"] = first_line(
                [str(fixit_python), "-c", "import importlib.metadata as m; print(m.version('libcst'))"]
            )
    return Toolbox(gradgate, features, ruff, fixit, sys.executable, grep, versions)


def rmtree(path: Path) -> Callable[[], None]:
    return lambda: shutil.rmtree(path, ignore_errors=True)


def build_tools(
    box: Toolbox,
    cwd: str,
    target: list[str],
    files_list: str,
    scratch: Path,
    tag: str,
    include_slow: bool = True,
    subset: tuple[str, ...] | None = None,
    skip: frozenset[str] = frozenset(),
) -> list[Tool]:
    """The command set, run in ``cwd`` on ``target`` (a dir or files), for one corpus."""
    f = box.features
    gg = [*box.gradgate, "check", *(["--format", "json"] if f["format_json"] else [])]
    genv, penv = gradgate_env(), plain_env()
    cold_dir, warm_dir = scratch / f"gg-cold-{tag}", scratch / f"gg-warm-{tag}"
    ruff_cache = scratch / f"ruff-cache-{tag}"
    tools: list[Tool] = []
    if f["cache_dir"]:
        tools.append(
            Tool(
                "gg_cold",
                "gradgate check, cold (empty --cache-dir)",
                [*gg, "--cache-dir", str(cold_dir), *target],
                cwd,
                genv,
                before=rmtree(cold_dir),
                group="gradgate",
            )
        )
        tools.append(
            Tool(
                "gg_warm",
                "gradgate check, warm (cache populated)",
                [*gg, "--cache-dir", str(warm_dir), *target],
                cwd,
                genv,
                group="gradgate",
            )
        )
    else:
        note = "this gradgate has no --cache-dir: plain runs"
        tools.append(
            Tool(
                "gg_cold",
                "gradgate check (plain; no cache flags)",
                [*gg, *target],
                cwd,
                genv,
                group="gradgate",
                note=note,
            )
        )
        tools.append(
            Tool(
                "gg_warm",
                "gradgate check (plain rerun; no cache flags)",
                [*gg, *target],
                cwd,
                genv,
                group="gradgate",
                note=note,
            )
        )
    if f["no_cache"]:
        tools.append(
            Tool("gg_nocache", "gradgate check --no-cache", [*gg, "--no-cache", *target], cwd, genv, group="gradgate")
        )
    ruff_missing = "not installed"
    tools.append(
        Tool(
            "ruff",
            "ruff check (default rules, --no-cache)",
            [box.ruff, "check", "--isolated", "--no-cache", *target] if box.ruff else None,
            cwd,
            penv,
            missing=ruff_missing,
        )
    )
    tools.append(
        Tool(
            "ruff_cached",
            "ruff check (default rules, warm cache)",
            [box.ruff, "check", "--isolated", "--cache-dir", str(ruff_cache), *target] if box.ruff else None,
            cwd,
            penv,
            missing=ruff_missing,
        )
    )
    tools.append(
        Tool(
            "ruff_all",
            "ruff check --select ALL --output-format concise (--no-cache)",
            [box.ruff, "check", "--isolated", "--no-cache", "--select", "ALL", "--output-format", "concise", *target]
            if box.ruff
            else None,
            cwd,
            penv,
            missing=ruff_missing,
        )
    )
    tools.append(
        Tool(
            "grep",
            f"grep -rl {GREP_TOKEN} (floor)",
            [box.grep, "-rl", "--include=*.py", GREP_TOKEN, *target] if box.grep else None,
            cwd,
            penv,
            missing="not installed",
        )
    )
    if include_slow:
        tools.append(
            Tool(
                "fixit",
                "fixit lint (default rules)",
                [box.fixit, "lint", *target] if box.fixit else None,
                cwd,
                penv,
                slow=True,
                missing="not installed",
            )
        )
        tools.append(
            Tool(
                "libcst",
                "bare LibCST parse of every file (1 process)",
                [box.python, "-c", PARSE_SCRIPT, files_list],
                cwd,
                python_env(),
                ok_rc=(0,),
                slow=True,
            )
        )
        if f["no_prefilter"] and "noprefilter" not in skip:
            tools.append(
                Tool(
                    "gg_noprefilter",
                    "gradgate check --no-cache --no-prefilter (once)",
                    [*gg, "--no-cache", "--no-prefilter", *target],
                    cwd,
                    genv,
                    once=True,
                    group="gradgate",
                )
            )
    if subset is not None:
        tools = [t for t in tools if t.key in subset]
    return tools


# ------------------------------------------------------------------ verification
def findings_verdict(results: dict[str, Result], tools: list[Tool]) -> dict[str, Any]:
    """Every gradgate output (all runs) must parse to the same list of findings."""
    outputs: dict[str, list[Any]] = {}
    for tool in tools:
        if tool.group != "gradgate":
            continue
        result = results[tool.key]
        records = result.runs + ([result.mem_run] if result.mem_run else [])
        for index, record in enumerate(records):
            try:
                data = json.loads(Path(record.stdout).read_text() or "[]")
            except ValueError:
                data = Path(record.stdout).read_text()
            outputs[f"{tool.key}#{index}"] = data
    if not outputs:
        return {"verdict": "not checked", "compared": 0, "findings": None, "modes": []}
    reference_key = next(iter(outputs))
    reference = outputs[reference_key]
    differing = [k for k, v in outputs.items() if v != reference]
    modes = sorted({k.split("#")[0] for k in outputs})
    failed = [k for k in modes if results[k].failed]
    verdict = "identical" if not differing and not failed else "DIFFERENT" if differing else "incomplete"
    return {
        "verdict": verdict,
        "compared": len(outputs),
        "modes": modes,
        "findings": len(reference) if isinstance(reference, list) else None,
        "differing": differing,
        "failed_modes": failed,
        "no_prefilter_checked": "gg_noprefilter" in modes,
    }


def ruff_file_count(box: Toolbox, cwd: str, target: str) -> int | None:
    if not box.ruff:
        return None
    done = subprocess.run(
        [box.ruff, "check", "--isolated", "--show-files", target],
        cwd=cwd,
        capture_output=True,
        text=True,
        env=plain_env(),
        check=False,
    )
    return sum(1 for line in done.stdout.splitlines() if line.strip().endswith(".py"))


def fixit_file_count(result: Result) -> int | None:
    for record in result.runs:
        for stream in (record.stdout + ".err", record.stdout):
            match = re.search(r"(\d+) files? checked", Path(stream).read_text(errors="replace"))
            if match:
                return int(match.group(1))
    return None


# ------------------------------------------------------------------------ output
def fmt_s(value: float | None) -> str:
    if value is None:
        return "–"
    return f"{value:.3f}" if value < 10 else f"{value:.1f}"


def fmt_ratio(value: float | None, base: float | None) -> str:
    if value is None or not base:
        return "–"
    ratio = value / base
    return f"{ratio:.2f}×" if ratio < 100 else f"{ratio:.0f}×"


def fmt_mib(value: int | None) -> str:
    return "–" if not value else f"{value / MIB:.0f}"  # 0: exited before the first sample


def corpus_table(
    results: dict[str, Result], files: int, size: int, order: list[str], timeout: float = 0.0
) -> list[str]:
    cold = results.get("gg_cold")
    warm = results.get("gg_warm")
    base_cold = cold.median if cold else None
    base_warm = warm.median if warm else None
    lines = [
        "| tool | runs | median wall s | min s | CPU s | files/s | MB/s | peak RSS MiB | tree PSS MiB | × gradgate cold | × gradgate warm |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for key in order:
        result = results.get(key)
        if result is None:
            continue
        if result.missing:
            lines.append(f"| {result.label} | – | {result.missing} | | | | | | | | |")
            continue
        if result.failed and not result.runs:
            if result.failed.startswith("timed out"):
                bound = max([r.wall_s for r in result.timeouts] or [timeout])
                lines.append(
                    f"| {result.label} | 0 (killed at {bound:.0f} s) | > {bound:.0f} | | | < {files / bound:,.1f} | "
                    f"< {size / MB / bound:.3f} | {fmt_mib(result.maxrss)} | {fmt_mib(result.tree_pss)} | "
                    f"> {fmt_ratio(bound, base_cold)} | > {fmt_ratio(bound, base_warm)} |"
                )
            else:
                lines.append(f"| {result.label} | 0 | failed: {result.failed[:80]} | | | | | | | | |")
            continue
        median = result.median if result.ok else statistics.median(result.walls)
        note = "" if result.ok else f" ({result.failed[:60]})"
        lines.append(
            f"| {result.label}{note} | {len(result.runs)} | {fmt_s(median)} | {fmt_s(result.minimum)} | "
            f"{fmt_s(result.cpu)} | {files / median:,.0f} | {size / MB / median:.2f} | "
            f"{fmt_mib(result.maxrss)} | {fmt_mib(result.tree_pss)} | "
            f"{fmt_ratio(median, base_cold)} | {fmt_ratio(median, base_warm)} |"
        )
    return lines


ORDER = [
    "gg_cold",
    "gg_warm",
    "gg_nocache",
    "gg_nocache_inherit",
    "gg_noprefilter",
    "ruff",
    "ruff_cached",
    "ruff_all",
    "fixit",
    "libcst",
    "grep",
    "py_floor",
    "py_libcst",
]


def linear_fit(xs: list[float], ys: list[float]) -> tuple[float, float] | None:
    """Least squares ``y = a + b x``."""
    if len(xs) < 2:
        return None
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    if sxx == 0:
        return None
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
    return my - b * mx, b


# -------------------------------------------------------------------------- main
def machine_info() -> dict[str, Any]:
    cpu = "unknown"
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    ram = None
    try:
        with open("/proc/meminfo", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("MemTotal:"):
                    ram = int(line.split()[1]) * 1024
                    break
    except OSError:
        pass
    return {
        "nproc": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "cpu_model": cpu,
        "ram_bytes": ram,
        "kernel": platform.release(),
        "os": platform.platform(),
        "loadavg_start": os.getloadavg(),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--cache",
        default=os.path.expanduser("~/.cache/gradgate-bench"),
        help="download/unpack folder (default: %(default)s)",
    )
    parser.add_argument(
        "--corpora",
        default=",".join(c.key for c in CORPORA),
        help="comma-separated subset of: " + ", ".join(c.key for c in CORPORA),
    )
    parser.add_argument("--runs", type=int, default=5, help="timed runs of fast commands (default: 5)")
    parser.add_argument(
        "--slow-budget",
        type=float,
        default=20.0,
        help="seconds a slow command (fixit, LibCST parse) may take in all before "
        "no further run starts; it always runs at least once (default: 20)",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=300.0,
        help="per-run timeout in seconds; a run past it is killed (default: 300)",
    )
    parser.add_argument(
        "--skip", default="", help="comma-separated parts to skip: fixit, libcst, noprefilter, single, scaling, stages"
    )
    parser.add_argument(
        "--scaling", default="0.125,0.25,0.5,1", help="fractions of the four corpora together (default: %(default)s)"
    )
    parser.add_argument("--gradgate", help="gradgate command (default: this Python -m gradgate)")
    parser.add_argument(
        "--no-snapshot",
        action="store_true",
        help="run gradgate from the checkout itself, not from a copy taken at the start",
    )
    parser.add_argument("--ruff", help="ruff executable")
    parser.add_argument("--fixit", help="fixit executable")
    parser.add_argument(
        "--install-tools", action="store_true", help="pip-install ruff and fixit into CACHE/tools-venv first"
    )
    parser.add_argument("--json", dest="json_out", help="write every raw number to this file")
    parser.add_argument("--markdown", help="also write the report to this file")
    parser.add_argument(
        "--report-from", metavar="JSON", help="measure nothing: re-render the report of an earlier --json file"
    )
    args = parser.parse_args(argv)
    if args.report_from:
        report = json.loads(Path(args.report_from).read_text())
        saved = parser.parse_args([a for a in report.get("argv", [])[1:]])
        for section in [*report.get("corpora", {}).values(), report.get("single_file"), *report.get("scaling", [])]:
            if section:
                section["_results"] = {k: Result.from_dict(k, d) for k, d in section["results"].items()}
        text = render(report, saved)
        print(text)
        if args.markdown:
            Path(args.markdown).write_text(text + "\n")
        return 0
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    skip = frozenset(s.strip() for s in args.skip.split(",") if s.strip())
    wanted = [c for c in CORPORA if c.key in {k.strip() for k in args.corpora.split(",")}]
    if not wanted:
        parser.error("no known corpus in --corpora")

    cache = Path(args.cache).expanduser().resolve()
    cache.mkdir(parents=True, exist_ok=True)
    global PYCACHE_PREFIX
    PYCACHE_PREFIX = str(cache / "pycache")
    scratch = Path(tempfile.mkdtemp(prefix="gradgate-bench-"))

    def terminate(signum: int, frame: object) -> None:
        raise SystemExit(128 + signum)  # so that the scratch folder is removed

    signal.signal(signal.SIGTERM, terminate)
    bench = Bench(args, scratch)
    started = datetime.datetime.now(datetime.UTC)
    try:
        if args.install_tools:
            install_tools(cache, bench.log)
        global GRADGATE_PATH
        snapshot = "none (--no-snapshot: the live checkout)"
        if not args.no_snapshot and not args.gradgate:
            path, digest = snapshot_gradgate(scratch)
            probe = subprocess.run(
                [
                    sys.executable,
                    "-c",
                    ("import gradgate, gradgate.rules; print(gradgate.__file__); print(gradgate.rules.__path__[0])"),
                ],
                capture_output=True,
                text=True,
                check=False,
                cwd=str(scratch),
                env={**python_env(), "PYTHONPATH": path},
            )
            if all(line.startswith(path) for line in probe.stdout.split()) and probe.stdout.strip():
                GRADGATE_PATH = path
                snapshot = f"copy of gradgate/ and rules/ taken at the start (sha256 {digest})"
            else:
                snapshot = "none (the copy did not import; ran the live checkout)"
        box = make_toolbox(args, cache)
        box.versions["gradgate_source"] = snapshot
        if "fixit" in skip:
            box.fixit = None
            box.versions["fixit"] += " (skipped)"
        machine = machine_info()
        report: dict[str, Any] = {
            "started": started.isoformat(timespec="seconds"),
            "argv": sys.argv,
            "machine": machine,
            "versions": box.versions,
            "gradgate_features": box.features,
            "corpora": {},
        }
        bench.log(f"tools: {box.versions}")
        bench.log(f"gradgate flags: {box.features}")

        corpus_info: dict[str, dict[str, Any]] = {}
        for corpus in wanted:
            root, archive = prepare_corpus(corpus, cache, bench.log)
            files = python_files(root)
            size = sum(os.path.getsize(root.parent / f) for f in files)
            list_file = scratch / f"files-{corpus.key}.txt"
            list_file.write_text("\n".join(files) + "\n")
            corpus_info[corpus.key] = {
                "root": root,
                "archive": archive,
                "files": files,
                "bytes": size,
                "list": str(list_file),
            }

        # -- per corpus ---------------------------------------------------------
        for corpus in wanted:
            info = corpus_info[corpus.key]
            root: Path = info["root"]
            cwd = str(root.parent)
            bench.log(f"{corpus.key}: {len(info['files'])} files, {info['bytes'] / MB:.1f} MB in {root}")
            ruff_count = ruff_file_count(box, cwd, corpus.import_dir)
            target = [corpus.import_dir]
            note = ""
            if ruff_count is not None and ruff_count != len(info["files"]):
                target = info["files"]  # ruff and gradgate would see different sets: name the files
                note = (
                    f"ruff lists {ruff_count} files, gradgate's walk {len(info['files'])}: "
                    "every tool is given the file list"
                )
            tools = build_tools(box, cwd, target, info["list"], scratch, corpus.key, skip=skip)
            if "libcst" in skip:
                tools = [t for t in tools if t.key != "libcst"]
            meter = CpuMeter()
            results = bench.measure(tools)
            noise = meter.stop()
            fixit_count = fixit_file_count(results["fixit"]) if "fixit" in results else None
            verdict = findings_verdict(results, tools)
            bench.log(f"{corpus.key}: findings {verdict['verdict']} over {verdict['compared']} outputs")
            report["corpora"][corpus.key] = {
                "package": f"{corpus.dist_name}=={corpus.version}",
                "archive": info["archive"],
                "import_dir": corpus.import_dir,
                "files": len(info["files"]),
                "bytes": info["bytes"],
                "ruff_files": ruff_count,
                "fixit_files": fixit_count,
                "note": note,
                "results": {k: v.as_dict() for k, v in results.items()},
                "_results": results,
                "findings": verdict,
                "noise": noise,
            }

        # -- single file ----------------------------------------------------------
        if "te" in corpus_info and "single" not in skip:
            info = corpus_info["te"]
            cwd = str(info["root"].parent)
            single_list = scratch / "files-single.txt"
            single_list.write_text(SINGLE_FILE + "\n")
            tools = build_tools(box, cwd, [SINGLE_FILE], str(single_list), scratch, "single", skip=skip)
            if box.features["no_cache"]:
                tools.insert(
                    3,
                    Tool(
                        "gg_nocache_inherit",
                        "gradgate check --no-cache, inherited env (PYTHONDONTWRITEBYTECODE="
                        f"{os.environ.get('PYTHONDONTWRITEBYTECODE', 'unset')})",
                        [*box.gradgate, "check", "--format", "json", "--no-cache", SINGLE_FILE],
                        cwd,
                        gradgate_env(inherit=True),
                        group="gradgate",
                    ),
                )
            if "libcst" in skip:
                tools = [t for t in tools if t.key != "libcst"]
            tools.append(
                Tool(
                    "py_floor",
                    "python -c pass (interpreter start)",
                    [sys.executable, "-c", "pass"],
                    cwd,
                    python_env(),
                    ok_rc=(0,),
                )
            )
            tools.append(
                Tool(
                    "py_libcst",
                    "python -c 'import libcst'",
                    [sys.executable, "-c", "import libcst"],
                    cwd,
                    python_env(),
                    ok_rc=(0,),
                )
            )
            bench.log(f"single file: {SINGLE_FILE}")
            meter = CpuMeter()
            results = bench.measure(tools)
            noise = meter.stop()
            size = os.path.getsize(info["root"].parent / SINGLE_FILE)
            report["single_file"] = {
                "path": SINGLE_FILE,
                "bytes": size,
                "results": {k: v.as_dict() for k, v in results.items()},
                "_results": results,
                "findings": findings_verdict(results, tools),
                "noise": noise,
            }

        # -- scaling ----------------------------------------------------------------
        if "scaling" not in skip:
            fractions = [float(x) for x in args.scaling.split(",") if x.strip()]
            everything = [(key, f) for key, info in corpus_info.items() for f in info["files"]]
            random.Random(0).shuffle(everything)
            rows = []
            meter = CpuMeter()
            for fraction in fractions:
                count = max(1, round(len(everything) * fraction))
                chosen = everything[:count]
                base = scratch / f"scaling-{count}"
                for key, rel in chosen:
                    src = corpus_info[key]["root"].parent / rel
                    dst = base / key / rel
                    dst.parent.mkdir(parents=True, exist_ok=True)
                    try:
                        os.link(src, dst)
                    except OSError:
                        shutil.copy2(src, dst)
                size = sum(os.path.getsize(corpus_info[k]["root"].parent / r) for k, r in chosen)
                subset_list = scratch / f"files-scaling-{count}.txt"
                subset_list.write_text("\n".join(f"{k}/{r}" for k, r in chosen) + "\n")
                targets = sorted({k for k, _ in chosen})
                tools = build_tools(
                    box,
                    str(base),
                    targets,
                    str(subset_list),
                    scratch,
                    f"scale{count}",
                    include_slow=False,
                    subset=("gg_cold", "gg_warm", "ruff"),
                )
                bench.log(f"scaling: {count} files, {size / MB:.1f} MB")
                results = bench.measure(tools)
                rows.append(
                    {
                        "fraction": fraction,
                        "files": count,
                        "bytes": size,
                        "results": {k: v.as_dict() for k, v in results.items()},
                        "_results": results,
                        "findings": findings_verdict(results, tools),
                    }
                )
            report["scaling"] = rows
            report["scaling_noise"] = meter.stop()

        # -- stages ------------------------------------------------------------------
        if "stages" not in skip:
            report["stages"] = {}
            for key, info in corpus_info.items():
                done = subprocess.run(
                    [sys.executable, str(HERE / "stages.py"), info["list"]],
                    cwd=str(info["root"].parent),
                    capture_output=True,
                    text=True,
                    env=gradgate_env(),
                    check=False,
                )
                try:
                    report["stages"][key] = json.loads(done.stdout)
                except ValueError:
                    report["stages"][key] = {"error": (done.stderr or done.stdout)[-300:]}

        machine["loadavg_end"] = os.getloadavg()
        report["elapsed_s"] = time.perf_counter() - bench.log_start
        text = render(report, args)
        print(text)
        if args.markdown:
            Path(args.markdown).write_text(text + "\n")
        if args.json_out:
            Path(args.json_out).write_text(json.dumps(strip_private(report), indent=1, default=str) + "\n")
        return 0
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def strip_private(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: strip_private(v) for k, v in value.items() if not str(k).startswith("_")}
    if isinstance(value, list):
        return [strip_private(v) for v in value]
    return value


# ------------------------------------------------------------------------ report
def goal(ok: bool | None) -> str:
    return "n/a" if ok is None else "**PASS**" if ok else "**FAIL**"


def render(report: dict[str, Any], args: argparse.Namespace) -> str:
    m, v = report["machine"], report["versions"]
    out: list[str] = []
    out.append(f"## gradgate benchmark ({report['started']})")
    out.append("")
    out.append(
        f"- machine: {m['nproc']} CPUs ({m['cpu_model']}), "
        f"{(m['ram_bytes'] or 0) / (1 << 30):.1f} GiB RAM, Linux {m['kernel']}; "
        f"load average at start {m['loadavg_start'][0]:.2f}, at end {m['loadavg_end'][0]:.2f}"
    )
    out.append(f"- Python {v['python']}; libcst {v['libcst']}")
    out.append(
        f"- gradgate: {v['gradgate']} (commit {v['gradgate_commit']}, uncommitted changes in "
        f"gradgate/ or rules/: {v['gradgate_modified']}; code run: {v.get('gradgate_source', '?')}); "
        "check flags: " + ", ".join(f"{k}={'yes' if x else 'NO'}" for k, x in report["gradgate_features"].items())
    )
    out.append(
        f"- ruff: {v['ruff']} ({v.get('ruff_default_rules', '?')} rules enabled by default, "
        f"{v.get('ruff_all_rules', '?')} with ALL); fixit: {v['fixit']}"
        + (f" (libcst {v['fixit_libcst']})" if v.get("fixit_libcst") else "")
        + f"; grep: {v['grep']}"
    )
    out.append(
        f"- {args.runs} timed runs of fast commands after 1 untimed warm-up, interleaved; "
        f"slow commands until {args.slow_budget:g} s are spent (at least 1 run); "
        f"per-run timeout {args.timeout:g} s; total benchmark time {report['elapsed_s']:.0f} s"
    )
    out.append(
        "- every command is a fresh process; Python commands run with bytecode compiled by "
        "the warm-up (`PYTHONDONTWRITEBYTECODE` dropped, `PYTHONPYCACHEPREFIX=CACHE/pycache`); "
        "the OS page cache holds the corpora (warm disk) for every tool"
    )
    out.append(
        "- ratios are time / gradgate's time (above 1: slower than gradgate). "
        "MB = 10^6 bytes; memory in MiB. 'peak RSS' = largest single process (wait4); "
        "'tree PSS' = largest sampled sum over the command's processes"
    )
    out.append("")

    for data in report["corpora"].values():
        out.append(f"### {data['package']} — `{data['import_dir']}/` ({data['archive']})")
        out.append("")
        counts = f"{data['files']} files, {data['bytes'] / MB:.2f} MB"
        extra = []
        if data["ruff_files"] is not None:
            extra.append(f"ruff sees {data['ruff_files']}")
        if data["fixit_files"] is not None:
            extra.append(f"fixit checked {data['fixit_files']}")
        out.append(f"{counts}" + (f" ({'; '.join(extra)})" if extra else "") + ".")
        if data["note"]:
            out.append(f"Note: {data['note']}.")
        out.append("")
        out.extend(corpus_table(data["_results"], data["files"], data["bytes"], ORDER, args.timeout))
        out.append("")
        out.append(f"- {fmt_noise(data.get('noise'))}")
        for result in data["_results"].values():
            if result.note:
                out.append(f"- {result.label}: {result.note}")
        f = data["findings"]
        out.append(
            f"- same findings: **{f['verdict']}** across {f['compared']} gradgate outputs "
            f"({', '.join(f['modes'])}); findings in each: {f['findings']}"
            + (
                ""
                if f.get("no_prefilter_checked")
                else "; --no-prefilter not compared ("
                + ("skipped" if report["gradgate_features"]["no_prefilter"] else "flag missing")
                + ")"
            )
            + (f"; differing: {', '.join(f['differing'])}" if f.get("differing") else "")
            + "."
        )
        out.append("")

    single = report.get("single_file")
    if single:
        out.append(f"### Single file: `{single['path']}` ({single['bytes'] / 1000:.0f} kB)")
        out.append("")
        out.extend(corpus_table(single["_results"], 1, single["bytes"], ORDER, args.timeout))
        out.append("")
        out.append(f"- {fmt_noise(single.get('noise'))}")
        f = single["findings"]
        out.append(
            f"- same findings: **{f['verdict']}** across {f['compared']} gradgate outputs; "
            f"findings in each: {f['findings']}."
        )
        out.append("")

    scaling = report.get("scaling")
    if scaling:
        out.append("### Scaling: random subsets of the four corpora together (seed 0)")
        out.append("")
        out.append(
            "| files | MB | gradgate cold s | gradgate warm s | ruff s | cold / ruff | warm / ruff | gradgate cold peak RSS MiB | tree PSS MiB | findings |"
        )
        out.append("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
        series: dict[str, list[tuple[float, float]]] = {"gg_cold": [], "gg_warm": [], "ruff": []}
        for row in scaling:
            r = row["_results"]
            cold, warm, ruff = r.get("gg_cold"), r.get("gg_warm"), r.get("ruff")
            for k, res in (("gg_cold", cold), ("gg_warm", warm), ("ruff", ruff)):
                if res is not None and res.median is not None:
                    series[k].append((row["bytes"] / MB, res.median))
            out.append(
                f"| {row['files']} | {row['bytes'] / MB:.1f} | {fmt_s(cold.median if cold else None)} | "
                f"{fmt_s(warm.median if warm else None)} | {fmt_s(ruff.median if ruff else None)} | "
                f"{fmt_ratio(cold.median if cold else None, ruff.median if ruff else None)} | "
                f"{fmt_ratio(warm.median if warm else None, ruff.median if ruff else None)} | "
                f"{fmt_mib(cold.maxrss if cold else None)} | {fmt_mib(cold.tree_pss if cold else None)} | "
                f"{row['findings']['verdict']} |"
            )
        out.append("")
        for k, label in (("gg_cold", "gradgate cold"), ("gg_warm", "gradgate warm"), ("ruff", "ruff")):
            fit = linear_fit([x for x, _ in series[k]], [y for _, y in series[k]])
            if fit:
                a, b = fit
                rate = f"{1 / b:.1f} MB/s marginal" if b > 0 else "no growth measured"
                out.append(f"- {label}: time ≈ {a:.3f} s + {b * 1000:.1f} ms/MB ({rate})")
        out.append(f"- {fmt_noise(report.get('scaling_noise'))}")
        report["scaling_fit"] = {k: linear_fit([x for x, _ in s], [y for _, y in s]) for k, s in series.items()}
        out.append("")

    stages = report.get("stages")
    if stages:
        out.append("### Where gradgate spends its time (one process, serial, no cache; `stages.py`)")
        out.append("")
        out.append(
            "| corpus | import libcst s | import gradgate s | read s | files by stage (s) "
            "| lines LibCST parsed | slowest file |"
        )
        out.append("|---|---:|---:|---:|---|---:|---|")
        for key, s in stages.items():
            if "error" in s:
                out.append(f"| {key} | unavailable: {s['error'][:80]} | | | | | |")
                continue
            by_stage = ", ".join(f"{name} {d['files']} ({d['seconds']:.3f})" for name, d in s["stages"].items())
            slowest = s["slowest"][0] if s["slowest"] else None
            slow_text = f"`{slowest['path']}` ({slowest['stage']}, {slowest['seconds']:.3f} s)" if slowest else ""
            out.append(
                f"| {key} | {s['import_libcst_s']:.3f} | {s['import_gradgate_s']:.3f} | {s['read_s']:.3f} | "
                f"{by_stage} | {_parsed_share(s)} | {slow_text} |"
            )
        out.append("")

    out.extend(render_goals(report))
    return "\n".join(out)


def _parsed_share(stage_report: dict[str, Any]) -> str:
    if "cst_lines" not in stage_report:
        return "–"
    return f"{stage_report['cst_lines']:,} of {stage_report['lines']:,}"


def render_goals(report: dict[str, Any]) -> list[str]:
    out = ["### Goals (TE corpus, same run)", ""]
    te = report["corpora"].get("te")
    goals: list[tuple[str, str, bool | None]] = []

    def med(results: dict[str, Result], key: str) -> float | None:
        r = results.get(key)
        return r.median if r is not None else None

    if te:
        r = te["_results"]
        cold, warm = med(r, "gg_cold"), med(r, "gg_warm")
        ruff, ruff_cached, parse = med(r, "ruff"), med(r, "ruff_cached"), med(r, "libcst")

        def ratio(a: float | None, b: float | None) -> float | None:
            return a / b if a and b else None

        x = ratio(cold, ruff)
        goals.append(
            (
                "gradgate cold ≤ 3× `ruff check` (default rules, --no-cache)",
                f"{fmt_s(cold)} s / {fmt_s(ruff)} s = {x:.2f}×" if x else "not measured",
                None if x is None else x <= 3,
            )
        )
        x = ratio(parse, cold)
        goals.append(
            (
                "gradgate cold ≥ 10× faster than a bare LibCST parse of every file",
                f"{fmt_s(parse)} s / {fmt_s(cold)} s = {x:.1f}× faster" if x else "not measured",
                None if x is None else x >= 10,
            )
        )
        x = ratio(warm, ruff)
        goals.append(
            (
                "gradgate warm ≤ 1.5× `ruff check` (default rules, --no-cache)",
                f"{fmt_s(warm)} s / {fmt_s(ruff)} s = {x:.2f}×" if x else "not measured",
                None if x is None else x <= 1.5,
            )
        )
        x = ratio(warm, ruff_cached)
        goals.append(
            (
                "(stricter reading) gradgate warm ≤ 1.5× `ruff check` with ruff's own cache warm",
                f"{fmt_s(warm)} s / {fmt_s(ruff_cached)} s = {x:.2f}×" if x else "not measured",
                None if x is None else x <= 1.5,
            )
        )
    single = report.get("single_file")
    if single:
        r = single["_results"]
        values = {k: med(r, k) for k in ("gg_cold", "gg_warm", "gg_nocache") if k in r}
        measured = [x for x in values.values() if x is not None]
        detail = ", ".join(f"{k.removeprefix('gg_')} {fmt_s(x)} s" for k, x in values.items())
        detail += f" (fixit {fmt_s(med(r, 'fixit'))} s, ruff {fmt_s(med(r, 'ruff'))} s)"
        goals.append(
            (
                "single-file check of layernorm_mlp.py < 0.4 s (cold, warm and --no-cache)",
                detail,
                (max(measured) < 0.4) if measured else None,
            )
        )
    if report["corpora"]:
        largest_key = max(report["corpora"], key=lambda k: report["corpora"][k]["bytes"])
        r = report["corpora"][largest_key]["_results"]
        peaks = {k: r[k].peak for k in ("gg_cold", "gg_warm", "gg_nocache") if k in r and r[k].peak}
        peak = max(peaks.values()) if peaks else None
        goals.append(
            (
                (
                    f"peak memory < 200 MB on the largest corpus ({largest_key}, "
                    f"{report['corpora'][largest_key]['bytes'] / MB:.1f} MB; cold, warm, --no-cache; "
                    "max of peak RSS and tree PSS)"
                ),
                f"{peak / MB:.0f} MB ({peak / MIB:.0f} MiB)" if peak else "not measured",
                None if peak is None else peak < 200 * MB,
            )
        )
    verdicts = [d["findings"] for d in report["corpora"].values()]
    if single:
        verdicts.append(single["findings"])
    verdicts += [row["findings"] for row in report.get("scaling", [])]
    same = all(v["verdict"] == "identical" for v in verdicts) if verdicts else None
    prefilter = all(d["findings"].get("no_prefilter_checked") for d in report["corpora"].values())
    goals.append(
        (
            "same findings: cold = warm = --no-cache = --no-prefilter, every run, every corpus",
            ", ".join(f"{k}: {d['findings']['verdict']}" for k, d in report["corpora"].items())
            + ("" if prefilter else "; --no-prefilter not compared"),
            same if prefilter else (None if same else same),
        )
    )
    out.append("| goal | measured | verdict |")
    out.append("|---|---|---|")
    for name, detail, ok in goals:
        out.append(f"| {name} | {detail} | {goal(ok)} |")
    report["goals"] = [{"goal": n, "measured": d, "pass": ok} for n, d, ok in goals]
    return out


if __name__ == "__main__":
    sys.exit(main())
