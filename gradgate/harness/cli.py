"""``gradgate harness``: validate the #2902 fix on real GPUs (the click command; no torch).

Builds (for ``--te fixed|both``) an overlay of the installed transformer_engine with
gradgate's autofix applied, runs ``torchrun -m gradgate.harness`` on all visible GPUs (or
``--nproc-per-node N``; TP size = number of ranks, at least 2) once per TE variant, and writes
report.json, report.md and speedup.png to ``--output``, printing one verdict line per case.

Exit codes: 0 all good; 1 the fixed TE missed the overlap path, a module diverged from its
reference, a case errored or a run did not complete; 2 usage or environment errors.
"""

from __future__ import annotations

import shlex
import shutil
import tempfile
from pathlib import Path
from typing import Any

import click

from . import launcher
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


class HarnessError(click.ClickException):
    """An environment problem (no GPUs, TE missing, fix failed): exit code 2."""

    exit_code = 2


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


def _ranks(nproc_per_node: int | None) -> int:
    if nproc_per_node is not None:
        return nproc_per_node
    found = launcher.count_visible_gpus()
    if found < 2:
        raise HarnessError(f"the harness needs at least 2 visible GPUs (TP size = GPUs), found {found}")
    return found


def _case_shape(opts: dict[str, Any], nproc: int) -> None:
    """Fill in the default case shape for ``nproc`` ranks; a usage error if it cannot split."""
    default_hidden, default_seq = default_case_shape(nproc)
    opts["hidden_size"] = opts["hidden_size"] or default_hidden
    opts["seq_length"] = opts["seq_length"] or default_seq
    why = check_shape_for_tp(opts["hidden_size"], opts["seq_length"], nproc)
    if why:
        raise click.UsageError(f"{why}; choose --seq-length/--hidden-size to fit TP size {nproc}")


def _dry_run(variants: list[str], output: Path, opts: dict, nproc: int, overlay_dir: Path | None) -> None:
    planned_overlay = overlay_dir or Path(tempfile.gettempdir()) / "gradgate-te-fixed-XXXX"
    for i, variant in enumerate(variants):
        rank_args = launcher.rank_arguments(variant, output / f"raw-{variant}.json", opts, i == len(variants) - 1)
        prefix = f"PYTHONPATH={shlex.quote(str(planned_overlay))}:$PYTHONPATH " if variant == "fixed" else ""
        click.echo(prefix + shlex.join(launcher.torchrun_command(nproc, rank_args)))


def _fixed_te(overlay_dir: Path | None) -> launcher.FixedTE:
    try:
        original = overlay_mod.locate_installed_package()
    except overlay_mod.OverlayError as exc:
        raise HarnessError(str(exc)) from None
    root, temporary = launcher.plan_overlay(overlay_dir)
    click.echo(f"gradgate harness: building the fixed TE overlay of {original} in {root}")
    try:
        fixed = launcher.build_fixed_te(original, root, temporary)
    except overlay_mod.OverlayError as exc:
        raise HarnessError(f"cannot build the fixed TE overlay: {exc}") from None
    for c in fixed.changed:
        spans = ", ".join(f"{h['original'][0]}-{h['original'][1]}" for h in c.hunks)
        click.echo(f"gradgate harness: fix changed {c.path} lines {spans}")
    return fixed


def _run_variants(
    variants: list[str],
    output: Path,
    opts: dict,
    nproc: int,
    fixed: launcher.FixedTE | None,
    ub_multicast: bool,
    timeout: int,
) -> tuple[dict[str, dict], dict[str, str]]:
    runs: dict[str, dict] = {}
    run_errors: dict[str, str] = {}
    for i, variant in enumerate(variants):
        result_file = (output / f"raw-{variant}.json").resolve()
        rank_args = launcher.rank_arguments(variant, result_file, opts, with_perf=i == len(variants) - 1)
        cmd = launcher.torchrun_command(nproc, rank_args)
        env = launcher.rank_environment(fixed.root if variant == "fixed" and fixed else None, ub_multicast)
        click.echo(f"gradgate harness: [{variant}] {shlex.join(cmd)}")
        try:
            result, error = launcher.run_variant(cmd, env, result_file, timeout or None)
        except OSError as exc:
            raise HarnessError(f"cannot start torchrun: {exc}") from None
        if result is not None:
            runs[variant] = result
        if error is not None:
            run_errors[variant] = error
    return runs, run_errors


def _settings(te_mode: str, nproc: int, opts: dict, ub_multicast: bool) -> dict[str, Any]:
    return {
        "te": te_mode,
        "nproc_per_node": nproc,
        "cases_shape": {"hidden": opts["hidden_size"], "seq": opts["seq_length"], "batch": opts["batch_size"]},
        "modules": list(opts["modules"]),
        "recipes": list(opts["recipes"]),
        "modes": list(opts["modes"]),
        "perf_shapes": [s.label for s in opts["perf_shapes"]],
        "perf_recipes": list(opts["perf_recipes"]) if opts["perf_shapes"] else [],
        "ub_multicast": ub_multicast,
        "rank_env": {
            k: launcher.rank_environment(None, ub_multicast).get(k)
            for k in ("CUDA_DEVICE_MAX_CONNECTIONS", "UB_SKIPMC")
        },
    }


@click.command("harness", context_settings={"show_default": True})
@click.option(
    "--te",
    "te_mode",
    type=click.Choice(["stock", "fixed", "both"]),
    default="both",
    help="TE under test: the installed one, an overlay fixed by `gradgate fix`, or both.",
)
@click.option(
    "--nproc-per-node",
    type=click.IntRange(min=2),
    default=None,
    help="Ranks (= GPUs = TP size). Default: all visible GPUs.",
)
@click.option(
    "--output",
    "-o",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("gradgate-harness-report"),
    help="Folder for report.json/.md/speedup.png.",
)
@click.option(
    "--modules",
    default="all",
    callback=_choice_list(MODULES, "module"),
    help=f"Comma list of {', '.join(MODULES)}, or all.",
)
@click.option(
    "--recipes",
    default="all",
    callback=_choice_list(RECIPES, "recipe"),
    help=f"Comma list of {', '.join(RECIPES)}, or all.",
)
@click.option(
    "--modes", default="all", callback=_choice_list(MODES, "mode"), help=f"Comma list of {', '.join(MODES)}, or all."
)
@click.option(
    "--hidden-size",
    type=click.IntRange(min=16),
    default=None,
    help="Hidden size of the cases. Default: 1024 rounded up to a multiple of 16 * TP.",
)
@click.option(
    "--seq-length",
    type=click.IntRange(min=16),
    default=None,
    help="Global sequence length of the cases (split over the ranks). "
    "Default: 2048 rounded up to a multiple of 16 * TP.",
)
@click.option("--batch-size", type=click.IntRange(min=1), default=2, help="Micro-batch size of the cases.")
@click.option("--seed", type=int, default=1234)
@click.option("--perf/--no-perf", default=True, help="Run the forward-only speed sweep (with the last TE run).")
@click.option(
    "--perf-shapes",
    default=DEFAULT_PERF_SHAPES,
    callback=_perf_shapes,
    help="HIDDENxSEQ comma list for the speed sweep.",
)
@click.option("--perf-recipes", default=DEFAULT_PERF_RECIPES, callback=_choice_list(RECIPES, "recipe"))
@click.option("--perf-modules", default="all", callback=_choice_list(MODULES, "module"))
@click.option("--perf-batch-size", type=click.IntRange(min=1), default=1)
@click.option("--perf-warmup", type=click.IntRange(min=0), default=20, help="Untimed forwards first.")
@click.option("--perf-repeats", type=click.IntRange(min=1), default=20, help="Timed forwards per round.")
@click.option(
    "--perf-rounds", type=click.IntRange(min=1), default=3, help="Alternating rounds of reference / overlap timing."
)
@click.option(
    "--overlay-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Build the fixed TE overlay here and keep it (default: a temporary folder, removed).",
)
@click.option(
    "--bootstrap-backend",
    type=click.Choice(["nccl", "gloo", "mpi"]),
    default="nccl",
    help="torch.distributed backend used to bootstrap UserBuffers.",
)
@click.option(
    "--ub-multicast/--no-ub-multicast",
    default=False,
    help="Let UserBuffers use NVLink multicast (off: UB_SKIPMC=1, CUDA IPC).",
)
@click.option(
    "--timeout", type=click.IntRange(min=0), default=0, help="Seconds allowed per torchrun run; 0 = no limit."
)
@click.option("--dry-run", is_flag=True, help="Print the torchrun command lines and exit.")
@click.pass_context
def harness(
    ctx: click.Context, /, te_mode, nproc_per_node, output, overlay_dir, ub_multicast, timeout, dry_run, perf, **opts
):
    """Check on GPUs that gradgate's fix makes TE take the UserBuffers overlap under no_grad."""
    nproc = _ranks(nproc_per_node)
    _case_shape(opts, nproc)
    if not perf:
        opts["perf_shapes"] = ()
    variants = ["stock", "fixed"] if te_mode == "both" else [te_mode]
    output = Path(output)
    if dry_run:
        _dry_run(variants, output, opts, nproc, overlay_dir)
        return
    output.mkdir(parents=True, exist_ok=True)
    fixed = _fixed_te(overlay_dir) if "fixed" in variants else None
    try:
        runs, run_errors = _run_variants(variants, output, opts, nproc, fixed, ub_multicast, timeout)
    finally:
        if fixed is not None and fixed.temporary is not None:
            shutil.rmtree(fixed.temporary, ignore_errors=True)
    report = report_mod.merge_runs(
        runs,
        command=_reconstruct_command(ctx),
        fix=fixed.info if fixed else None,
        run_errors=run_errors,
        settings=_settings(te_mode, nproc, opts, ub_multicast),
    )
    written = report_mod.write_report(report, output)
    for line in report_mod.verdict_lines(report):
        click.echo(line)
    click.echo(
        f"gradgate harness: wrote {written['json']}, {written['md']}"
        + (f", {written['png']}" if written["png"] else f" (no PNG: {written['png_note']})")
    )
    ctx.exit(report_mod.exit_code(report))
