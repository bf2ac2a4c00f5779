"""``gradgate harness``: validate the #2902 fix on real GPUs.

Builds (for ``--te fixed|both``) an overlay of the installed transformer_engine with
gradgate's autofix applied, runs ``torchrun -m gradgate.harness`` on all visible GPUs (or
``--nproc-per-node N``; TP size = number of ranks, at least 2) once per TE variant, and writes
report.json, report.md and speedup.png to ``--output``, printing one verdict line per case.

Exit codes: 0 all good; 1 the fixed TE missed the overlap path, a module diverged from its
reference, a case errored or a run did not complete; 2 usage or environment errors.

This module must not import torch or transformer_engine (checked by the tests): the lint
path of gradgate stays torch-free and the launcher only spawns processes that import them.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import click

from . import overlay as overlay_mod
from . import report as report_mod
from .cases import (
    DEFAULT_PERF_RECIPES,
    DEFAULT_PERF_SHAPES,
    MODES,
    MODULES,
    RECIPES,
    check_shape_for_tp,
    default_case_shape,
    parse_choice_list,
    parse_perf_shapes,
)

RANK_MODULE = "gradgate.harness"


class HarnessError(click.ClickException):
    """An environment problem (no GPUs, TE missing, fix failed): exit code 2."""

    exit_code = 2


# -- GPUs -------------------------------------------------------------------------------
def count_visible_gpus(env: dict[str, str] | None = None) -> int:
    """GPUs this process may use, without importing torch.

    ``nvidia-smi -L`` gives the GPUs of the machine; ``CUDA_VISIBLE_DEVICES``, when set,
    restricts them (entries up to the first invalid one, as CUDA reads it).
    """
    env = os.environ if env is None else env
    listed = None
    smi = shutil.which("nvidia-smi", path=env.get("PATH"))
    if smi:
        try:
            proc = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=60)
            if proc.returncode == 0:
                listed = sum(1 for line in proc.stdout.splitlines() if line.startswith("GPU "))
        except (OSError, subprocess.TimeoutExpired):
            listed = None
    visible = env.get("CUDA_VISIBLE_DEVICES")
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


def _choice_list(allowed: tuple[str, ...], what: str):
    def callback(_ctx, param, value):
        try:
            return parse_choice_list(value, allowed, what)
        except ValueError as exc:
            raise click.BadParameter(str(exc), param=param) from None

    return callback


def _perf_shapes(_ctx, param, value):
    try:
        return parse_perf_shapes(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param=param) from None


def _reconstruct_command(ctx: click.Context) -> str:
    """The command line, with the options the user gave (defaults left out)."""
    parts = ctx.command_path.split()
    for param in ctx.command.params:
        source = ctx.get_parameter_source(param.name)
        if source is None or source.name == "DEFAULT":
            continue
        value = ctx.params[param.name]
        if isinstance(param, click.Option) and param.is_flag:
            if param.secondary_opts:
                parts.append(param.opts[0] if value else param.secondary_opts[0])
            elif value:
                parts.append(param.opts[0])
            continue
        if isinstance(value, tuple):
            value = ",".join(getattr(v, "label", str(v)) for v in value)
        parts += [param.opts[0], str(value)]
    return shlex.join(parts)


# -- the command ------------------------------------------------------------------------
@click.command("harness", context_settings={"show_default": True})
@click.option("--te", "te_mode", type=click.Choice(["stock", "fixed", "both"]), default="both",
              help="TE under test: the installed one, an overlay fixed by `gradgate fix`, or both.")
@click.option("--nproc-per-node", type=click.IntRange(min=2), default=None,
              help="Ranks (= GPUs = TP size). Default: all visible GPUs.")
@click.option("--output", "-o", type=click.Path(file_okay=False, path_type=Path),
              default=Path("gradgate-harness-report"), help="Folder for report.json/.md/speedup.png.")
@click.option("--modules", default="all", callback=_choice_list(MODULES, "module"),
              help=f"Comma list of {', '.join(MODULES)}, or all.")
@click.option("--recipes", default="all", callback=_choice_list(RECIPES, "recipe"),
              help=f"Comma list of {', '.join(RECIPES)}, or all.")
@click.option("--modes", default="all", callback=_choice_list(MODES, "mode"),
              help=f"Comma list of {', '.join(MODES)}, or all.")
@click.option("--hidden-size", type=click.IntRange(min=16), default=None,
              help="Hidden size of the cases. Default: 1024 rounded up to a multiple of 16 * TP.")
@click.option("--seq-length", type=click.IntRange(min=16), default=None,
              help="Global sequence length of the cases (split over the ranks). "
                   "Default: 2048 rounded up to a multiple of 16 * TP.")
@click.option("--batch-size", type=click.IntRange(min=1), default=2, help="Micro-batch size of the cases.")
@click.option("--seed", type=int, default=1234)
@click.option("--perf/--no-perf", default=True, help="Run the forward-only speed sweep (with the last TE run).")
@click.option("--perf-shapes", default=DEFAULT_PERF_SHAPES, callback=_perf_shapes,
              help="HIDDENxSEQ comma list for the speed sweep.")
@click.option("--perf-recipes", default=DEFAULT_PERF_RECIPES, callback=_choice_list(RECIPES, "recipe"))
@click.option("--perf-modules", default="all", callback=_choice_list(MODULES, "module"))
@click.option("--perf-batch-size", type=click.IntRange(min=1), default=1)
@click.option("--perf-warmup", type=click.IntRange(min=0), default=20, help="Untimed forwards first.")
@click.option("--perf-repeats", type=click.IntRange(min=1), default=20, help="Timed forwards per round.")
@click.option("--perf-rounds", type=click.IntRange(min=1), default=3,
              help="Alternating rounds of reference / overlap timing.")
@click.option("--overlay-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Build the fixed TE overlay here and keep it (default: a temporary folder, removed).")
@click.option("--bootstrap-backend", type=click.Choice(["nccl", "gloo", "mpi"]), default="nccl",
              help="torch.distributed backend used to bootstrap UserBuffers.")
@click.option("--ub-multicast/--no-ub-multicast", default=False,
              help="Let UserBuffers use NVLink multicast (off: UB_SKIPMC=1, CUDA IPC).")
@click.option("--timeout", type=click.IntRange(min=0), default=0,
              help="Seconds allowed per torchrun run; 0 = no limit.")
@click.option("--dry-run", is_flag=True, help="Print the torchrun command lines and exit.")
@click.pass_context
def harness(ctx: click.Context, te_mode, nproc_per_node, output, overlay_dir, ub_multicast, timeout,
            dry_run, perf, **opts):
    """Check on GPUs that gradgate's fix makes TE take the UserBuffers overlap under no_grad."""
    if nproc_per_node is None:
        nproc_per_node = count_visible_gpus()
        if nproc_per_node < 2:
            raise HarnessError(
                f"the harness needs at least 2 visible GPUs (TP size = GPUs), found {nproc_per_node}"
            )
    default_hidden, default_seq = default_case_shape(nproc_per_node)
    opts["hidden_size"] = opts["hidden_size"] or default_hidden
    opts["seq_length"] = opts["seq_length"] or default_seq
    why = check_shape_for_tp(opts["hidden_size"], opts["seq_length"], nproc_per_node)
    if why:
        raise click.UsageError(f"{why}; choose --seq-length/--hidden-size to fit TP size {nproc_per_node}")
    if not perf:
        opts["perf_shapes"] = ()
    variants = ["stock", "fixed"] if te_mode == "both" else [te_mode]
    output = Path(output)
    command = _reconstruct_command(ctx)

    planned_overlay = overlay_dir or Path(tempfile.gettempdir()) / "gradgate-te-fixed-XXXX"
    if dry_run:
        for i, variant in enumerate(variants):
            rank_args = rank_arguments(variant, output / f"raw-{variant}.json", opts, i == len(variants) - 1)
            prefix = f"PYTHONPATH={shlex.quote(str(planned_overlay))}:$PYTHONPATH " if variant == "fixed" else ""
            click.echo(prefix + shlex.join(torchrun_command(nproc_per_node, rank_args)))
        return

    output.mkdir(parents=True, exist_ok=True)
    fix_info = None
    overlay_root = None
    temp_overlay = None
    if "fixed" in variants:
        try:
            original = overlay_mod.locate_installed_package()
        except overlay_mod.OverlayError as exc:
            raise HarnessError(str(exc)) from None
        if overlay_dir is None:
            temp_overlay = Path(tempfile.mkdtemp(prefix="gradgate-te-fixed-"))
            overlay_root = temp_overlay
        else:
            overlay_root = Path(overlay_dir)
        click.echo(f"gradgate harness: building the fixed TE overlay of {original} in {overlay_root}")
        try:
            built, fix_run, changed = overlay_mod.build_fixed_overlay(original, overlay_root)
        except overlay_mod.OverlayError as exc:
            raise HarnessError(f"cannot build the fixed TE overlay: {exc}") from None
        fix_info = {
            "overlay": built.as_dict(),
            "run": fix_run.as_dict(),
            "changed_files": [c.as_dict() for c in changed],
            "overlay_removed_after_run": temp_overlay is not None,
        }
        for c in changed:
            spans = ", ".join(f"{h['original'][0]}-{h['original'][1]}" for h in c.hunks)
            click.echo(f"gradgate harness: fix changed {c.path} lines {spans}")

    runs: dict[str, dict] = {}
    run_errors: dict[str, str] = {}
    try:
        for i, variant in enumerate(variants):
            result_file = (output / f"raw-{variant}.json").resolve()
            if result_file.exists():
                result_file.unlink()
            rank_args = rank_arguments(variant, result_file, opts, with_perf=i == len(variants) - 1)
            cmd = torchrun_command(nproc_per_node, rank_args)
            env = rank_environment(overlay_root if variant == "fixed" else None, ub_multicast)
            click.echo(f"gradgate harness: [{variant}] {shlex.join(cmd)}")
            try:
                returncode = run_process_group(cmd, env, timeout or None)
            except OSError as exc:
                raise HarnessError(f"cannot start torchrun: {exc}") from None
            if returncode is None:
                run_errors[variant] = f"torchrun did not finish within {timeout} s"
            elif returncode != 0:
                run_errors[variant] = f"torchrun exited with code {returncode}"
            if result_file.exists():
                runs[variant] = json.loads(result_file.read_text())
            elif variant not in run_errors:
                run_errors[variant] = "no result file written"
    finally:
        if temp_overlay is not None:
            shutil.rmtree(temp_overlay, ignore_errors=True)

    settings = {
        "te": te_mode,
        "nproc_per_node": nproc_per_node,
        "cases_shape": {"hidden": opts["hidden_size"], "seq": opts["seq_length"], "batch": opts["batch_size"]},
        "modules": list(opts["modules"]),
        "recipes": list(opts["recipes"]),
        "modes": list(opts["modes"]),
        "perf_shapes": [s.label for s in opts["perf_shapes"]],
        "perf_recipes": list(opts["perf_recipes"]) if opts["perf_shapes"] else [],
        "ub_multicast": ub_multicast,
        "rank_env": {
            k: rank_environment(None, ub_multicast).get(k)
            for k in ("CUDA_DEVICE_MAX_CONNECTIONS", "UB_SKIPMC")
        },
    }
    report = report_mod.merge_runs(
        runs, command=command, fix=fix_info, run_errors=run_errors, settings=settings
    )
    written = report_mod.write_report(report, output)
    for line in report_mod.verdict_lines(report):
        click.echo(line)
    click.echo(f"gradgate harness: wrote {written['json']}, {written['md']}"
               + (f", {written['png']}" if written["png"] else f" (no PNG: {written['png_note']})"))
    ctx.exit(report_mod.exit_code(report))


def main() -> None:  # pragma: no cover - `python -m gradgate.harness.launcher`
    harness()


if __name__ == "__main__":  # pragma: no cover
    main()
