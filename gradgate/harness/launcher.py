"""What ``gradgate harness`` (:mod:`gradgate.harness.cli`) runs: GPU counting, the fixed-TE
overlay, the torchrun command line and environment of each TE variant, and the runs.

This module must not import torch or transformer_engine (checked by the tests): the lint
path of gradgate stays torch-free and the launcher only spawns processes that import them.
It prints nothing; the click command does.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..records import record
from . import overlay as overlay_mod

RANK_MODULE = "gradgate.harness"


# -- GPUs -------------------------------------------------------------------------------
def count_visible_gpus(env: dict[str, str] | None = None) -> int:
    """GPUs this process may use, without importing torch.

    ``nvidia-smi -L`` gives the GPUs of the machine; ``CUDA_VISIBLE_DEVICES``, when set,
    restricts them (entries up to the first invalid one, as CUDA reads it).
    """
    environ: Mapping[str, str] = os.environ if env is None else env
    listed = None
    smi = shutil.which("nvidia-smi", path=environ.get("PATH"))
    if smi:
        try:
            proc = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=60)
            if proc.returncode == 0:
                listed = sum(1 for line in proc.stdout.splitlines() if line.startswith("GPU "))
        except (OSError, subprocess.TimeoutExpired):
            listed = None
    visible = environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        return listed or 0
    entries = []
    for entry in (e.strip() for e in visible.split(",")):
        if not entry or entry.startswith("-"):
            break
        entries.append(entry)
    return len(entries) if listed is None else min(len(entries), listed)


# -- command lines ----------------------------------------------------------------------
def torchrun_command(nproc: int, rank_args: list[str], python: str = sys.executable) -> list[str]:
    """``torchrun`` (as ``python -m torch.distributed.run``, the same interpreter) for one run."""
    return [
        python,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nnodes=1",
        f"--nproc-per-node={nproc}",
        "-m",
        RANK_MODULE,
        *rank_args,
    ]


def rank_arguments(variant: str, result_file: Path, opts: dict, with_perf: bool) -> list[str]:
    args = [
        "--te-label", variant,
        "--result-file", str(result_file),
        "--modules", ",".join(opts["modules"]),
        "--recipes", ",".join(opts["recipes"]),
        "--modes", ",".join(opts["modes"]),
        "--hidden-size", str(opts["hidden_size"]),
        "--seq-length", str(opts["seq_length"]),
        "--batch-size", str(opts["batch_size"]),
        "--seed", str(opts["seed"]),
        "--bootstrap-backend", opts["bootstrap_backend"],
    ]  # fmt: skip
    if with_perf and opts["perf_shapes"]:
        args += [
            "--perf-shapes", ",".join(s.label for s in opts["perf_shapes"]),
            "--perf-recipes", ",".join(opts["perf_recipes"]),
            "--perf-modules", ",".join(opts["perf_modules"]),
            "--perf-batch-size", str(opts["perf_batch_size"]),
            "--perf-warmup", str(opts["perf_warmup"]),
            "--perf-repeats", str(opts["perf_repeats"]),
            "--perf-rounds", str(opts["perf_rounds"]),
        ]  # fmt: skip
    return args


def rank_environment(
    overlay_root: Path | None, ub_multicast: bool, base: dict[str, str] | None = None
) -> dict[str, str]:
    """Environment of the torchrun ranks: the overlay first on PYTHONPATH (fixed run only)."""
    env = dict(os.environ if base is None else base)
    paths = []
    if overlay_root is not None:
        paths.append(str(overlay_root))
    paths += [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p not in paths]
    env["PYTHONPATH"] = os.pathsep.join(paths)
    # UserBuffers needs one hardware queue so the GEMM and the communication kernels overlap.
    env.setdefault("CUDA_DEVICE_MAX_CONNECTIONS", "1")
    if ub_multicast:
        env.pop("UB_SKIPMC", None)
    else:
        env["UB_SKIPMC"] = "1"  # CUDA IPC buffers instead of NVLink multicast objects
    env["PYTHONUNBUFFERED"] = "1"
    return env


def run_process_group(cmd: list[str], env: dict[str, str], timeout: float | None) -> int | None:
    """Run ``cmd`` in its own process group; on timeout end that group (torchrun and its
    ranks) and return None, else return the exit code."""
    proc = subprocess.Popen(cmd, env=env, start_new_session=True)
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        for sig, grace in ((signal.SIGTERM, 15), (signal.SIGKILL, 15)):
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                break
            try:
                proc.wait(timeout=grace)
                break
            except subprocess.TimeoutExpired:
                continue
        return None
    except KeyboardInterrupt:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait()
        raise


@record(frozen=False)
class FixedTE:
    """The fixed-TE overlay of one harness run, and what the report says about its fix."""

    root: Path
    info: dict[str, Any]
    #: the changed files, for the command to print
    changed: list[Any]
    #: the temporary folder to remove after the run, or None for ``--overlay-dir``
    temporary: Path | None


def plan_overlay(overlay_dir: Path | None) -> tuple[Path, Path | None]:
    """(overlay root, the temporary folder to remove after the run or None)."""
    if overlay_dir is not None:
        return Path(overlay_dir), None
    temporary = Path(tempfile.mkdtemp(prefix="gradgate-te-fixed-"))
    return temporary, temporary


def build_fixed_te(original: Path, root: Path, temporary: Path | None) -> FixedTE:
    """Overlay the installed transformer_engine ``original`` in ``root`` and fix it with
    ``gradgate fix``. Raises :class:`~.overlay.OverlayError` (after removing ``temporary``)."""
    try:
        built, fix_run, changed = overlay_mod.build_fixed_overlay(original, root)
    except overlay_mod.OverlayError:
        if temporary is not None:
            shutil.rmtree(temporary, ignore_errors=True)
        raise
    info = {
        "overlay": built.as_dict(),
        "run": fix_run.as_dict(),
        "changed_files": [c.as_dict() for c in changed],
        "overlay_removed_after_run": temporary is not None,
    }
    return FixedTE(root, info, changed, temporary)


def run_variant(
    cmd: list[str], env: dict[str, str], result_file: Path, timeout: float | None
) -> tuple[dict | None, str | None]:
    """Run one TE variant's torchrun; (rank 0's result or None, what went wrong or None).
    Raises OSError when torchrun cannot start."""
    if result_file.exists():
        result_file.unlink()
    returncode = run_process_group(cmd, env, timeout)
    error = None
    if returncode is None:
        error = f"torchrun did not finish within {int(timeout or 0)} s"
    elif returncode != 0:
        error = f"torchrun exited with code {returncode}"
    if result_file.exists():
        return json.loads(result_file.read_text()), error
    return None, error or "no result file written"
