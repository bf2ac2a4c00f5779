"""Per-rank body of the harness (``python -m gradgate.harness``, started by torchrun).

TP size = world size. Every rank builds, per (recipe, module, mode), a module with the
UserBuffers overlap requested and a non-overlap reference with identical weights, runs both
on the same sequence-parallel input shard, counts (with :class:`~.probe.OverlapProbe`)
whether each forward took the overlap path, and compares outputs and gradients. Results are
reduced over the ranks (overlap: on every rank; differences: the largest) and rank 0 writes
them to ``--result-file`` after every case, so a crash leaves the cases finished so far.

The work is in three modules: :mod:`.rank_setup` (process group, TE, UserBuffers, recipes,
module pairs), :mod:`.rank_cases` (the correctness cases) and :mod:`.rank_perf` (the speed
sweep); this one parses the arguments and runs them in order.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from .cases import MODES, MODULES, RECIPES, parse_choice_list, parse_perf_shapes
from .rank_cases import run_cases
from .rank_perf import run_perf
from .rank_setup import RankContext, setup, teardown


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m gradgate.harness", description=__doc__)
    p.add_argument("--te-label", choices=("stock", "fixed"), required=True)
    p.add_argument("--result-file", type=Path, required=True)
    p.add_argument("--modules", default="all")
    p.add_argument("--recipes", default="all")
    p.add_argument("--modes", default="all")
    p.add_argument("--hidden-size", type=int, default=1024)
    p.add_argument("--seq-length", type=int, default=2048)
    p.add_argument("--batch-size", type=int, default=2)
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--bootstrap-backend", default="nccl", choices=("nccl", "gloo", "mpi"))
    p.add_argument("--perf-shapes", default="", help="HIDDENxSEQ,...; empty: no perf sweep")
    p.add_argument("--perf-recipes", default="bf16")
    p.add_argument("--perf-modules", default="all")
    p.add_argument("--perf-batch-size", type=int, default=1)
    p.add_argument("--perf-warmup", type=int, default=20)
    p.add_argument("--perf-repeats", type=int, default=20)
    p.add_argument("--perf-rounds", type=int, default=3)
    args = p.parse_args(argv)
    args.modules = parse_choice_list(args.modules, MODULES, "module")
    args.recipes = parse_choice_list(args.recipes, RECIPES, "recipe")
    args.modes = parse_choice_list(args.modes, MODES, "mode")
    args.perf_recipes = parse_choice_list(args.perf_recipes, RECIPES, "recipe") if args.perf_shapes else ()
    args.perf_modules = parse_choice_list(args.perf_modules, MODULES, "module")
    args.perf_shapes = parse_perf_shapes(args.perf_shapes)
    return args


def run(ctx: RankContext) -> int:
    """Set up, run the cases, then (with ``--perf-shapes``) the speed sweep; mark the result complete."""
    setup(ctx)
    t0 = time.perf_counter()
    run_cases(ctx)
    ctx.result["environment"]["cases_seconds"] = round(time.perf_counter() - t0, 1)
    if ctx.args.perf_shapes:
        t0 = time.perf_counter()
        run_perf(ctx)
        ctx.result["environment"]["performance_seconds"] = round(time.perf_counter() - t0, 1)
    ctx.result["complete"] = True
    ctx.save()
    teardown(ctx)
    return 0


def main(argv: list[str] | None = None) -> int:
    return run(RankContext.from_environment(parse_args(argv)))
