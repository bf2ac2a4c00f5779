"""The speed measurement of a harness rank: forwards under no_grad, overlap vs no overlap,
timed with CUDA events (imports torch)."""

from __future__ import annotations

import gc
import sys
import traceback
from statistics import median
from typing import Any

import torch
import torch.distributed as dist

from .cases import check_shape_for_tp
from .probe import overlap_counts
from .rank_setup import (
    LNL_UB_NAME,
    RankContext,
    destroy_ub,
    forward,
    init_ub,
    make_pair,
    make_recipe,
    recipe_skip_reason,
)


def time_forwards(ctx: RankContext, module: Any, x: Any, recipe_obj: Any, n: int) -> list[float]:
    """Milliseconds of each of ``n`` forwards under no_grad (CUDA events)."""
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
    with torch.no_grad():
        for s, e in zip(starts, ends):
            s.record()
            forward(ctx, module, x, recipe_obj)
            e.record()
    torch.cuda.synchronize()
    return [s.elapsed_time(e) for s, e in zip(starts, ends)]


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def perf_entry(ctx: RankContext, kind: str, recipe: str, hidden: int, seq: int) -> dict:
    """Time the overlap module and its reference in alternating rounds; the slowest rank's
    statistics, and whether every timed forward took the overlap path."""
    a = ctx.args
    batch = a.perf_batch_size
    recipe_obj = make_recipe(recipe)
    torch.manual_seed(a.seed)
    test, ref = make_pair(ctx, kind, hidden)
    x = torch.randn(seq // ctx.tp, batch, hidden, dtype=torch.bfloat16, device=ctx.device)
    probe = ctx.probe
    probe.reset()
    probe.watch(test, "test")
    with torch.no_grad():
        for _ in range(a.perf_warmup):
            forward(ctx, ref, x, recipe_obj)
            forward(ctx, test, x, recipe_obj)
    torch.cuda.synchronize()
    dist.barrier(group=ctx.tp_group)
    probe.reset()
    t_ref: list[float] = []
    t_test: list[float] = []
    for _ in range(a.perf_rounds):
        t_ref += time_forwards(ctx, ref, x, recipe_obj, a.perf_repeats)
        t_test += time_forwards(ctx, test, x, recipe_obj, a.perf_repeats)
    used = [overlap_counts(kind, r, LNL_UB_NAME)["overlap_used"] for r in probe.forwards_of("test")]
    # the slowest rank sets the pace: take the largest statistic over the ranks
    stats = [median(t_ref), median(t_test)]
    stats += [quantile(t_ref, 0.1), quantile(t_ref, 0.9), quantile(t_test, 0.1), quantile(t_test, 0.9)]
    t_max = torch.tensor(stats, dtype=torch.float64, device=ctx.device)
    dist.all_reduce(t_max, op=dist.ReduceOp.MAX, group=ctx.tp_group)
    t_min = torch.tensor([sum(used), len(used)], device=ctx.device)
    dist.all_reduce(t_min, op=dist.ReduceOp.MIN, group=ctx.tp_group)
    ref_ms, test_ms, ref_p10, ref_p90, test_p10, test_p90 = t_max.tolist()
    n_used, n_timed = (int(v) for v in t_min.tolist())
    del test, ref, x
    return {
        "no_overlap_ms": round(ref_ms, 4),
        "overlap_ms": round(test_ms, 4),
        "speedup": round(ref_ms / test_ms, 4),
        "no_overlap_ms_p10_p90": [round(ref_p10, 4), round(ref_p90, 4)],
        "overlap_ms_p10_p90": [round(test_p10, 4), round(test_p90, 4)],
        "overlap_used": n_timed > 0 and n_used == n_timed,
        "timed_forwards": n_timed,
        "warmup": a.perf_warmup,
        "repeats": a.perf_repeats * a.perf_rounds,
        "statistic": "median (and 10th/90th percentile) of per-forward CUDA-event times, largest over ranks",
    }


def run_perf(ctx: RankContext) -> None:
    """The sweep over ``--perf-shapes`` x recipes x modules, saved entry by entry."""
    a = ctx.args
    for shape in a.perf_shapes:
        why = check_shape_for_tp(shape.hidden, shape.seq, ctx.tp)
        tokens = shape.seq * a.perf_batch_size
        init_error = None
        if not why:
            try:
                init_ub(ctx, tokens, shape.hidden)
            except Exception as exc:  # noqa: BLE001 - reported per entry, not fatal
                print(traceback.format_exc(), file=sys.stderr, flush=True)
                init_error = f"initialize_ub failed: {type(exc).__name__}: {exc}"
        for recipe in a.perf_recipes:
            skip = why or recipe_skip_reason(ctx, recipe)
            for kind in a.perf_modules:
                entry: dict[str, Any] = {
                    "module": kind,
                    "recipe": recipe,
                    "te": a.te_label,
                    "mode": "no_grad",
                    "hidden": shape.hidden,
                    "seq": shape.seq,
                    "batch": a.perf_batch_size,
                    "tp": ctx.tp,
                }
                if skip:
                    entry["skipped"] = skip
                elif init_error:
                    entry["error"] = init_error
                else:
                    try:
                        entry.update(perf_entry(ctx, kind, recipe, shape.hidden, shape.seq))
                    except Exception as exc:  # noqa: BLE001 - one entry's failure is reported, not fatal
                        print(traceback.format_exc(), file=sys.stderr, flush=True)
                        entry["error"] = f"{type(exc).__name__}: {exc}"
                    ctx.probe.clear_hooks()
                    gc.collect()
                    torch.cuda.empty_cache()
                ctx.result["performance"].append(entry)
                ctx.save()
                ctx.log(perf_line(entry))
        if not why and not init_error:
            destroy_ub(ctx)


def perf_line(entry: dict) -> str:
    head = f"perf {entry['module']:<15} {entry['recipe']:<20} h={entry['hidden']} s={entry['seq']}"
    if "skipped" in entry:
        return f"{head} skipped: {entry['skipped']}"
    if "error" in entry:
        return f"{head} ERROR {entry['error']}"
    return (
        f"{head} no-overlap {entry['no_overlap_ms']:.3f} ms, overlap {entry['overlap_ms']:.3f} ms, "
        f"speedup {entry['speedup']:.3f}x, overlap_used={entry['overlap_used']}"
    )
