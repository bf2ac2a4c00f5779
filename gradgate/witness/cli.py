"""``gradgate witness CASES.py``: run a file of witness cases under torchrun (no torch import).

Starts ``torchrun -m gradgate.witness`` (gloo on CPU, NCCL on GPUs), reads rank 0's
result, lints the files the cases touch, prints one verdict per case and per finding and
writes the JSON report. Exit codes: 0 every case took the same forward path; 1 a case
diverges or fails; 2 usage or environment errors.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
import tempfile
from pathlib import Path

import click

from ..harness.launcher import count_visible_gpus, run_process_group
from .report import exit_code, finding_verdicts, verdict_lines

RANK_MODULE = "gradgate.witness"
MODE_NAMES = ("grad", "no_grad", "checkpoint", "checkpoint_non_reentrant")


class WitnessError(click.ClickException):
    exit_code = 2


def torchrun_command(nproc: int, rank_args: list[str], python: str = sys.executable) -> list[str]:
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


def _modes(_ctx: click.Context, param: click.Parameter, value: str) -> tuple[str, ...]:
    modes = tuple(m.strip() for m in value.split(",") if m.strip())
    unknown = [m for m in modes if m not in MODE_NAMES]
    if unknown or not modes:
        raise click.BadParameter(
            f"unknown mode(s) {', '.join(unknown)}; choose from {', '.join(MODE_NAMES)}"
            if unknown
            else "no mode given",
            param=param,
        )
    return modes


@click.command("witness")
@click.argument("cases", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "--backend",
    type=click.Choice(["auto", "gloo", "nccl"]),
    default="auto",
    show_default=True,
    help="auto: NCCL when GPUs are visible, else gloo.",
)
@click.option(
    "--nproc-per-node",
    type=click.IntRange(min=1),
    default=None,
    help="Ranks. Default: the visible GPUs under NCCL, 2 under gloo.",
)
@click.option(
    "--modes",
    default="grad,no_grad,checkpoint",
    show_default=True,
    callback=_modes,
    help=f"Comma list of {', '.join(MODE_NAMES)}.",
)
@click.option("--case", "only", multiple=True, help="Run only this case (repeatable).")
@click.option("--probe", multiple=True, help="package.module:function to count per forward (repeatable).")
@click.option(
    "--output",
    "-o",
    type=click.Path(dir_okay=False, path_type=Path),
    default=Path("witness-report.json"),
    show_default=True,
    help="The JSON report.",
)
@click.option("--timeout", type=click.IntRange(min=0), default=0, help="Seconds for the torchrun run; 0 = no limit.")
@click.option("--dry-run", is_flag=True, help="Print the torchrun command line and exit.")
@click.pass_context
def witness(
    ctx: click.Context,
    cases: Path,
    backend: str,
    nproc_per_node: int | None,
    modes: tuple[str, ...],
    only: tuple[str, ...],
    probe: tuple[str, ...],
    output: Path,
    timeout: int,
    dry_run: bool,
) -> None:
    """Run the cases of CASES (functions `case` / `case_*` returning `module, inputs`) in
    every grad mode and report where their forward paths part."""
    if backend == "auto":
        backend = "nccl" if count_visible_gpus() else "gloo"
    if nproc_per_node is None:
        nproc_per_node = count_visible_gpus() if backend == "nccl" else 2
        if nproc_per_node < 1:
            raise WitnessError("--backend nccl needs a visible GPU")
    with tempfile.TemporaryDirectory(prefix="gradgate-witness-") as tmp:
        result_file = Path(tmp) / "rank0.json"
        rank_args = [
            str(cases.resolve()),
            "--result-file",
            str(result_file),
            "--backend",
            backend,
            "--modes",
            ",".join(modes),
        ]
        for name in only:
            rank_args += ["--case", name]
        for target in probe:
            rank_args += ["--probe", target]
        cmd = torchrun_command(nproc_per_node, rank_args)
        if dry_run:
            click.echo(shlex.join(cmd))
            return
        try:
            returncode = run_process_group(cmd, dict(os.environ), timeout or None)
        except OSError as exc:
            raise WitnessError(f"cannot start torchrun: {exc}") from None
        run_errors = []
        if returncode is None:
            run_errors.append(f"torchrun did not finish within {timeout} s")
        elif returncode != 0:
            run_errors.append(f"torchrun exited with code {returncode}")
        if not result_file.exists():
            raise WitnessError("; ".join([*run_errors, "no result written (is torch installed?)"]))
        result = json.loads(result_file.read_text())
    if not result.get("complete") and not run_errors:
        run_errors.append("run did not complete")
    result["run_errors"] = run_errors
    result["command"] = shlex.join(cmd)
    result["findings"] = finding_verdicts(result)
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(result, indent=2) + "\n")
    for line in verdict_lines(result):
        click.echo(line)
    click.echo(f"gradgate witness: wrote {output}")
    ctx.exit(exit_code(result))
