"""The correctness cases of a harness rank: per (recipe, module, mode), run the overlap module
and its reference, observe which forwards took the overlap path and compare the tensors
(imports torch)."""

from __future__ import annotations

import functools
import math
import sys
import time
import traceback
from typing import Any

import torch
import torch.distributed as dist

from .cases import check_shape_for_tp, tolerance_for
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

#: the forwards each mode makes, in order
PHASES = {
    "no_grad": ["forward"],
    "grad": ["forward"],
    "checkpoint_reentrant": ["first_forward", "recompute"],
    "checkpoint_non_reentrant": ["first_forward", "recompute"],
}


def run_mode(ctx: RankContext, module: Any, x: Any, dy: Any, recipe_obj: Any, mode: str) -> list[tuple[str, Any]]:
    """Run ``module`` in ``mode``; return [(name, tensor)] to compare."""
    if mode == "no_grad":
        with torch.no_grad():
            out = forward(ctx, module, x, recipe_obj)
        return [("output", out)]
    xg = x.detach().clone().requires_grad_(True)
    if mode == "grad":
        out = forward(ctx, module, xg, recipe_obj)
        out.backward(dy)
    elif mode in ("checkpoint_reentrant", "checkpoint_non_reentrant"):
        from torch.utils.checkpoint import checkpoint, set_checkpoint_early_stop

        fn = functools.partial(forward, ctx, module, recipe_obj=recipe_obj)
        # early stop off: the non-reentrant recompute runs the whole forward (and its hooks)
        with set_checkpoint_early_stop(False):
            out = checkpoint(fn, xg, use_reentrant=mode == "checkpoint_reentrant")
            out.backward(dy)
    else:
        raise ValueError(mode)
    tensors = [("output", out.detach()), ("input.grad", xg.grad)]
    for name, param in module.named_parameters():
        tensors.append((f"{name}.grad", param.grad))
    return tensors


def compare(ctx: RankContext, pairs: list[tuple[str, Any, Any]], tol: dict[str, float]) -> list[dict]:
    """Per tensor: largest |test - ref| over all ranks, bitwise equal / within tol everywhere."""
    stats = []
    for _name, test, ref in pairs:
        if test is None or ref is None or test.shape != ref.shape:
            stats.append([math.inf, 0.0, 0.0])
            continue
        a, b = test.float(), ref.float()
        finite = bool(torch.isfinite(a).all() and torch.isfinite(b).all())
        diff = (a - b).abs()
        max_diff = diff.max().item() if diff.numel() else 0.0
        if not finite:
            max_diff = math.inf
        bitwise = torch.equal(test, ref)
        within = finite and bool((diff <= tol["atol"] + tol["rtol"] * b.abs()).all())
        stats.append([max_diff, float(bitwise), float(within)])
    t = torch.tensor(stats, dtype=torch.float64, device=ctx.device)
    t_max = t[:, 0].clone()
    t_min = t[:, 1:].clone()
    dist.all_reduce(t_max, op=dist.ReduceOp.MAX, group=ctx.tp_group)
    dist.all_reduce(t_min, op=dist.ReduceOp.MIN, group=ctx.tp_group)
    out = []
    for (name, test, _), mx, mn in zip(pairs, t_max.tolist(), t_min.tolist()):
        out.append(
            {
                "name": name,
                "shape": list(test.shape) if test is not None else None,
                "max_abs_diff": mx if math.isfinite(mx) else None,
                "bitwise_equal": bool(mn[0]),
                "within_tolerance": bool(mn[1]),
            }
        )
    return out


def forward_observations(ctx: RankContext, kind: str, label: str, mode: str) -> list[dict]:
    """Per forward of the ``label`` module: phase, grad mode, the overlap calls counted (the
    smallest count over the ranks: the overlap must run on every rank)."""
    records = ctx.probe.forwards_of(label)
    phases = PHASES[mode]
    rows = []
    for i, record in enumerate(records):
        counts = overlap_counts(kind, record, LNL_UB_NAME)
        rows.append(
            {
                "phase": phases[i] if i < len(phases) else f"forward_{i}",
                "grad_enabled": record.grad_enabled,
                **{k: v for k, v in counts.items() if k != "overlap_used"},
            }
        )
    keys = [k for k in ("ag_fill_calls", "ag_gemm_calls", "rs_gemm_calls") if rows and k in rows[0]]
    n = torch.tensor([len(rows)], device=ctx.device)
    dist.all_reduce(n, op=dist.ReduceOp.MIN, group=ctx.tp_group)
    if n.item() != len(rows):
        raise RuntimeError(f"ranks saw different numbers of forwards of {label}")
    if rows:
        t = torch.tensor([[row[k] for k in keys] for row in rows], device=ctx.device)
        dist.all_reduce(t, op=dist.ReduceOp.MIN, group=ctx.tp_group)
        for row, values in zip(rows, t.tolist()):
            row.update(dict(zip(keys, values)))
            row["overlap_used"] = all(row[k] > 0 for k in keys)
    return rows


def overlap_requested(kind: str) -> dict[str, Any]:
    if kind == "LayerNormLinear":
        return {"ub_overlap_ag": True, "ub_name": LNL_UB_NAME, "parallel_mode": "column", "sequence_parallel": True}
    return {"ub_overlap_ag": True, "ub_overlap_rs": True, "sequence_parallel": True}


def run_case(ctx: RankContext, kind: str, recipe: str, mode: str) -> dict:
    a = ctx.args
    hidden, seq, batch = a.hidden_size, a.seq_length, a.batch_size
    case: dict[str, Any] = {
        "module": kind,
        "recipe": recipe,
        "te": a.te_label,
        "mode": mode,
        "shape": {"hidden": hidden, "seq": seq, "batch": batch, "tp": ctx.tp},
        "overlap_requested": overlap_requested(kind),
    }
    recipe_obj = make_recipe(recipe)
    torch.manual_seed(a.seed)
    torch.cuda.manual_seed(a.seed + ctx.rank)
    test, ref = make_pair(ctx, kind, hidden)
    gen = torch.Generator(device=ctx.device).manual_seed(a.seed * 7919 + ctx.rank)
    x = torch.randn(seq // ctx.tp, batch, hidden, dtype=torch.bfloat16, device=ctx.device, generator=gen)

    probe = ctx.probe
    probe.reset()
    probe.watch(test, "test")
    probe.watch(ref, "reference")
    dy = None
    if mode != "no_grad":
        # output shape: LNL column-parallel gathers the sequence; LNMLP reduce-scatters it
        out_shape = (seq, batch, 3 * hidden // ctx.tp) if kind == "LayerNormLinear" else (seq // ctx.tp, batch, hidden)
        dy = torch.randn(out_shape, dtype=torch.bfloat16, device=ctx.device, generator=gen)
    test_tensors = run_mode(ctx, test, x, dy, recipe_obj, mode)
    test_backward_calls = dict(probe.outside_forward)
    probe.outside_forward.clear()
    ref_tensors = run_mode(ctx, ref, x, dy, recipe_obj, mode)
    torch.cuda.synchronize()

    forwards = forward_observations(ctx, kind, "test", mode)
    ref_forwards = probe.forwards_of("reference")
    ref_ub_calls = sum(sum(r.calls.values()) for r in ref_forwards) + sum(probe.outside_forward.values())
    t = torch.tensor([ref_ub_calls], device=ctx.device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX, group=ctx.tp_group)

    tol = tolerance_for(recipe)
    names = [n for n, _ in test_tensors]
    if names != [n for n, _ in ref_tensors]:
        raise RuntimeError(f"test/reference tensors differ: {names} vs {[n for n, _ in ref_tensors]}")
    tensors = compare(ctx, [(n, tt, rt) for (n, tt), (_, rt) in zip(test_tensors, ref_tensors)], tol)
    diffs = [tr["max_abs_diff"] for tr in tensors]
    case.update(
        {
            "overlap_used": bool(forwards) and all(f["overlap_used"] for f in forwards),
            "matches_reference": all(tr["within_tolerance"] for tr in tensors),
            "max_abs_diff": None if any(d is None for d in diffs) else max(diffs),
            "bitwise_equal": all(tr["bitwise_equal"] for tr in tensors),
            "tolerance": tol,
            "forwards": forwards,
            "backward_userbuffers_calls": dict(sorted(test_backward_calls.items())),
            "reference_userbuffers_calls": int(t.item()),
            "tensors": tensors,
        }
    )
    del test, ref, test_tensors, ref_tensors
    return case


def _failed_case(ctx: RankContext, kind: str, recipe: str, mode: str, exc: Exception) -> dict:
    print(f"[rank {ctx.rank}] {kind} {recipe} {mode} failed:\n{traceback.format_exc()}", file=sys.stderr, flush=True)
    return {
        "module": kind,
        "recipe": recipe,
        "te": ctx.args.te_label,
        "mode": mode,
        "error": f"{type(exc).__name__}: {exc}",
        "overlap_used": False,
        "matches_reference": False,
        "max_abs_diff": None,
    }


def run_cases(ctx: RankContext) -> None:
    """Every (recipe, module, mode) case, appended to the result and saved one by one."""
    a = ctx.args
    why = check_shape_for_tp(a.hidden_size, a.seq_length, ctx.tp)
    if why:
        raise SystemExit(f"gradgate harness: {why}")
    init_ub(ctx, a.seq_length * a.batch_size, a.hidden_size)
    try:
        for recipe in a.recipes:
            skip = recipe_skip_reason(ctx, recipe)
            for kind in a.modules:
                for mode in a.modes:
                    if skip:
                        case = {"module": kind, "recipe": recipe, "te": a.te_label, "mode": mode, "skipped": skip}
                    else:
                        t0 = time.perf_counter()
                        try:
                            case = run_case(ctx, kind, recipe, mode)
                        except Exception as exc:  # noqa: BLE001 - one case's failure is reported, not fatal
                            case = _failed_case(ctx, kind, recipe, mode, exc)
                        case["seconds"] = round(time.perf_counter() - t0, 3)
                        ctx.probe.clear_hooks()
                    ctx.result["cases"].append(case)
                    ctx.save()
                    ctx.log(case_line(case))
                    torch.cuda.empty_cache()
    finally:
        destroy_ub(ctx)


def case_line(case: dict) -> str:
    head = f"{case['module']:<15} {case['recipe']:<20} {case['mode']:<24}"
    if "skipped" in case:
        return f"{head} skipped: {case['skipped']}"
    if "error" in case:
        return f"{head} ERROR {case['error']}"
    per_forward = ", ".join(
        f"{f['phase']}={'overlap' if f['overlap_used'] else 'no-overlap'}" for f in case["forwards"]
    )
    return (
        f"{head} overlap_used={case['overlap_used']} ({per_forward}) "
        f"matches_reference={case['matches_reference']} max_abs_diff={case['max_abs_diff']} "
        f"bitwise={case['bitwise_equal']}"
    )
