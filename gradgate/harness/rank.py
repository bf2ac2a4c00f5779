"""Per-rank body of the harness (``python -m gradgate.harness``, started by torchrun).

TP size = world size. Every rank builds, per (recipe, module, mode), a module with the
UserBuffers overlap requested and a non-overlap reference with identical weights, runs both
on the same sequence-parallel input shard, counts (with :class:`OverlapProbe`) whether each
forward took the overlap path, and compares outputs and gradients. Results are reduced
over the ranks (overlap: on every rank; differences: the largest) and rank 0 writes them to
``--result-file`` after every case, so a crash leaves the cases finished so far.
"""

from __future__ import annotations

import argparse
import datetime
import functools
import gc
import json
import math
import os
import platform
import sys
import time
import traceback
from pathlib import Path

import torch
import torch.distributed as dist

from .cases import (
    MODES,
    MODULES,
    RECIPES,
    check_shape_for_tp,
    parse_choice_list,
    parse_perf_shapes,
    tolerance_for,
)
from .probe import OverlapProbe, overlap_counts

LNL_UB_NAME = "qkv"


def parse_args(argv=None) -> argparse.Namespace:
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


class Rank:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.rank = int(os.environ.get("RANK", "0"))
        self.world = int(os.environ.get("WORLD_SIZE", "1"))
        self.local_rank = int(os.environ.get("LOCAL_RANK", "0"))
        self.result = {"te": args.te_label, "environment": {}, "cases": [], "performance": []}

    # -- plumbing -------------------------------------------------------------------------
    def log(self, msg: str) -> None:
        if self.rank == 0:
            print(f"[gradgate harness {self.args.te_label}] {msg}", flush=True)

    def save(self) -> None:
        if self.rank != 0:
            return
        path = self.args.result_file
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(path.suffix + ".tmp")
        tmp.write_text(json.dumps(self.result, indent=2, allow_nan=False) + "\n")
        tmp.replace(path)

    def setup(self) -> None:
        torch.cuda.set_device(self.local_rank)
        self.device = torch.device("cuda", self.local_rank)
        dist.init_process_group(
            backend="nccl",
            device_id=self.device,
            timeout=datetime.timedelta(minutes=5),
        )
        self.tp_group = dist.new_group(backend="nccl")
        self.tp = dist.get_world_size(self.tp_group)

        import transformer_engine
        import transformer_engine.pytorch as te

        self.te = te
        cc = torch.cuda.get_device_capability(self.device)
        self.result["environment"] = {
            "gpus": self.world,
            "tp_size": self.tp,
            "gpu_name": torch.cuda.get_device_name(self.device),
            "compute_capability": f"{cc[0]}.{cc[1]}",
            "torch": torch.__version__,
            "cuda": torch.version.cuda,
            "nccl": _nccl_version(),
            "transformer_engine": transformer_engine.__version__,
            "transformer_engine_path": str(Path(transformer_engine.__file__).resolve().parent),
            "python": platform.python_version(),
            "env": {
                k: os.environ.get(k)
                for k in ("CUDA_DEVICE_MAX_CONNECTIONS", "UB_SKIPMC", "NCCL_NVLS_ENABLE")
            },
        }
        self.probe = OverlapProbe().install()
        self.save()
        self.log(
            f"TE {transformer_engine.__version__} from {self.result['environment']['transformer_engine_path']}, "
            f"torch {torch.__version__}, {self.world} x {self.result['environment']['gpu_name']}"
        )

    def init_ub(self, tokens: int, hidden: int) -> None:
        te = self.te
        te.initialize_ub(
            [tokens, hidden],
            self.tp,
            quantization_modes=[te.UserBufferQuantizationMode.NONE, te.UserBufferQuantizationMode.FP8],
            dtype=torch.bfloat16,
            bootstrap_backend=self.args.bootstrap_backend,
        )

    def destroy_ub(self) -> None:
        self.te.destroy_ub()
        gc.collect()
        torch.cuda.synchronize()

    # -- recipes and modules --------------------------------------------------------------
    def recipe_skip_reason(self, recipe: str) -> str | None:
        te = self.te
        if recipe == "bf16":
            return None
        if recipe == "mxfp8":
            ok, reason = te.is_mxfp8_available(return_reason=True)
        elif recipe == "nvfp4":
            ok, reason = te.is_nvfp4_available(return_reason=True)
        else:
            ok, reason = te.is_fp8_available(return_reason=True)
        if ok:
            return None
        gpu = self.result["environment"]
        return f"{reason} ({gpu['gpu_name']} is compute capability {gpu['compute_capability']})".strip()

    def make_recipe(self, recipe: str):
        from transformer_engine.common import recipe as r

        if recipe == "bf16":
            return None
        if recipe == "fp8_delayed_scaling":
            return r.DelayedScaling(
                fp8_format=r.Format.HYBRID, amax_history_len=32, amax_compute_algo="max"
            )
        if recipe == "fp8_current_scaling":
            return r.Float8CurrentScaling(fp8_format=r.Format.HYBRID)
        if recipe == "mxfp8":
            return r.MXFP8BlockScaling()
        if recipe == "nvfp4":
            return r.NVFP4BlockScaling()
        raise ValueError(recipe)

    def make_module(self, kind: str, hidden: int, seq: int, batch: int, overlap: bool):
        te = self.te
        common = dict(
            params_dtype=torch.bfloat16,
            device="cuda",
            tp_group=self.tp_group,
            tp_size=self.tp,
            sequence_parallel=True,
        )
        if kind == "LayerNormLinear":
            return te.LayerNormLinear(
                hidden,
                3 * hidden,
                parallel_mode="column",
                ub_overlap_ag=overlap,
                ub_name=LNL_UB_NAME if overlap else None,
                **common,
            )
        if kind == "LayerNormMLP":
            return te.LayerNormMLP(
                hidden,
                4 * hidden,
                set_parallel_mode=True,
                ub_overlap_ag=overlap,
                ub_overlap_rs=overlap,
                **common,
            )
        raise ValueError(kind)

    def make_pair(self, kind: str, hidden: int, seq: int, batch: int):
        test = self.make_module(kind, hidden, seq, batch, overlap=True)
        ref = self.make_module(kind, hidden, seq, batch, overlap=False)
        with torch.no_grad():
            for (name, p_test), (name_ref, p_ref) in zip(test.named_parameters(), ref.named_parameters()):
                assert name == name_ref, (name, name_ref)
                p_ref.copy_(p_test)
        for (_, p_test), (_, p_ref) in zip(test.named_parameters(), ref.named_parameters()):
            assert torch.equal(p_test, p_ref)
        return test, ref

    def forward(self, module, x, recipe_obj):
        with self.te.autocast(
            enabled=recipe_obj is not None, recipe=recipe_obj, amax_reduction_group=self.tp_group
        ):
            out = module(x)
        return out[0] if isinstance(out, tuple) else out

    # -- one case -------------------------------------------------------------------------
    def run_mode(self, module, x, dy, recipe_obj, mode: str):
        """Run ``module`` in ``mode``; return [(name, tensor)] to compare."""
        if mode == "no_grad":
            with torch.no_grad():
                out = self.forward(module, x, recipe_obj)
            return [("output", out)]
        xg = x.detach().clone().requires_grad_(True)
        if mode == "grad":
            out = self.forward(module, xg, recipe_obj)
        elif mode == "checkpoint_reentrant":
            from torch.utils.checkpoint import checkpoint

            fn = functools.partial(self.forward, module, recipe_obj=recipe_obj)
            out = checkpoint(fn, xg, use_reentrant=True)
        else:
            raise ValueError(mode)
        out.backward(dy)
        tensors = [("output", out.detach()), ("input.grad", xg.grad)]
        for name, param in module.named_parameters():
            tensors.append((f"{name}.grad", param.grad))
        return tensors

    def compare(self, pairs, tol) -> list[dict]:
        """Per tensor: largest |test - ref| over all ranks, bitwise equal / within tol everywhere."""
        stats = []
        for name, test, ref in pairs:
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
        t = torch.tensor(stats, dtype=torch.float64, device=self.device)
        t_max = t[:, 0].clone()
        t_min = t[:, 1:].clone()
        dist.all_reduce(t_max, op=dist.ReduceOp.MAX, group=self.tp_group)
        dist.all_reduce(t_min, op=dist.ReduceOp.MIN, group=self.tp_group)
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

    def forward_observations(self, kind: str, label: str, mode: str) -> list[dict]:
        records = self.probe.forwards_of(label)
        phases = {
            "no_grad": ["forward"],
            "grad": ["forward"],
            "checkpoint_reentrant": ["first_forward", "recompute"],
        }[mode]
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
        # overlap on every rank: reduce the counts with MIN
        keys = [k for k in ("ag_fill_calls", "ag_gemm_calls", "rs_gemm_calls") if rows and k in rows[0]]
        n = torch.tensor([len(rows)], device=self.device)
        dist.all_reduce(n, op=dist.ReduceOp.MIN, group=self.tp_group)
        if n.item() != len(rows):
            raise RuntimeError(f"ranks saw different numbers of forwards of {label}")
        if rows:
            t = torch.tensor([[row[k] for k in keys] for row in rows], device=self.device)
            dist.all_reduce(t, op=dist.ReduceOp.MIN, group=self.tp_group)
            for row, values in zip(rows, t.tolist()):
                row.update(dict(zip(keys, values)))
                row["overlap_used"] = all(row[k] > 0 for k in keys)
        return rows

    def run_case(self, kind: str, recipe: str, mode: str) -> dict:
        a = self.args
        hidden, seq, batch = a.hidden_size, a.seq_length, a.batch_size
        case = {
            "module": kind,
            "recipe": recipe,
            "te": a.te_label,
            "mode": mode,
            "shape": {"hidden": hidden, "seq": seq, "batch": batch, "tp": self.tp},
            "overlap_requested": (
                {"ub_overlap_ag": True, "ub_name": LNL_UB_NAME, "parallel_mode": "column", "sequence_parallel": True}
                if kind == "LayerNormLinear"
                else {"ub_overlap_ag": True, "ub_overlap_rs": True, "sequence_parallel": True}
            ),
        }
        recipe_obj = self.make_recipe(recipe)
        torch.manual_seed(a.seed)
        torch.cuda.manual_seed(a.seed + self.rank)
        test, ref = self.make_pair(kind, hidden, seq, batch)
        gen = torch.Generator(device=self.device).manual_seed(a.seed * 7919 + self.rank)
        x = torch.randn(seq // self.tp, batch, hidden, dtype=torch.bfloat16, device=self.device, generator=gen)

        self.probe.reset()
        self.probe.watch(test, "test")
        self.probe.watch(ref, "reference")
        dy = None
        if mode != "no_grad":
            # output shape: LNL column-parallel gathers the sequence; LNMLP reduce-scatters it
            out_shape = (
                (seq, batch, 3 * hidden // self.tp) if kind == "LayerNormLinear" else (seq // self.tp, batch, hidden)
            )
            dy = torch.randn(out_shape, dtype=torch.bfloat16, device=self.device, generator=gen)
        test_tensors = self.run_mode(test, x, dy, recipe_obj, mode)
        test_backward_calls = dict(self.probe.outside_forward)
        self.probe.outside_forward.clear()
        ref_tensors = self.run_mode(ref, x, dy, recipe_obj, mode)
        torch.cuda.synchronize()

        forwards = self.forward_observations(kind, "test", mode)
        ref_forwards = self.probe.forwards_of("reference")
        ref_ub_calls = sum(sum(r.calls.values()) for r in ref_forwards) + sum(self.probe.outside_forward.values())
        t = torch.tensor([ref_ub_calls], device=self.device)
        dist.all_reduce(t, op=dist.ReduceOp.MAX, group=self.tp_group)

        tol = tolerance_for(recipe)
        names = [n for n, _ in test_tensors]
        if names != [n for n, _ in ref_tensors]:
            raise RuntimeError(f"test/reference tensors differ: {names} vs {[n for n, _ in ref_tensors]}")
        tensors = self.compare([(n, tt, rt) for (n, tt), (_, rt) in zip(test_tensors, ref_tensors)], tol)
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

    def run_cases(self) -> None:
        a = self.args
        why = check_shape_for_tp(a.hidden_size, a.seq_length, self.tp)
        if why:
            raise SystemExit(f"gradgate harness: {why}")
        self.init_ub(a.seq_length * a.batch_size, a.hidden_size)
        try:
            for recipe in a.recipes:
                skip = self.recipe_skip_reason(recipe)
                for kind in a.modules:
                    for mode in a.modes:
                        if skip:
                            case = {"module": kind, "recipe": recipe, "te": a.te_label, "mode": mode, "skipped": skip}
                        else:
                            t0 = time.perf_counter()
                            try:
                                case = self.run_case(kind, recipe, mode)
                            except Exception as exc:  # noqa: BLE001 - one case's failure is reported, not fatal
                                tb = traceback.format_exc()
                                print(f"[rank {self.rank}] {kind} {recipe} {mode} failed:\n{tb}", file=sys.stderr, flush=True)
                                case = {
                                    "module": kind,
                                    "recipe": recipe,
                                    "te": a.te_label,
                                    "mode": mode,
                                    "error": f"{type(exc).__name__}: {exc}",
                                    "overlap_used": False,
                                    "matches_reference": False,
                                    "max_abs_diff": None,
                                }
                            case["seconds"] = round(time.perf_counter() - t0, 3)
                            self.probe.clear_hooks()
                        self.result["cases"].append(case)
                        self.save()
                        self.log(_case_line(case))
                        torch.cuda.empty_cache()
        finally:
            self.destroy_ub()

    # -- performance ----------------------------------------------------------------------
    def time_forwards(self, module, x, recipe_obj, n: int) -> list[float]:
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
        with torch.no_grad():
            for s, e in zip(starts, ends):
                s.record()
                self.forward(module, x, recipe_obj)
                e.record()
        torch.cuda.synchronize()
        return [s.elapsed_time(e) for s, e in zip(starts, ends)]

    def run_perf(self) -> None:
        a = self.args
        for shape in a.perf_shapes:
            why = check_shape_for_tp(shape.hidden, shape.seq, self.tp)
            tokens = shape.seq * a.perf_batch_size
            init_error = None
            if not why:
                try:
                    self.init_ub(tokens, shape.hidden)
                except Exception as exc:  # noqa: BLE001
                    print(traceback.format_exc(), file=sys.stderr, flush=True)
                    init_error = f"initialize_ub failed: {type(exc).__name__}: {exc}"
            for recipe in a.perf_recipes:
                skip = why or self.recipe_skip_reason(recipe)
                for kind in a.perf_modules:
                    entry = {
                        "module": kind,
                        "recipe": recipe,
                        "te": a.te_label,
                        "mode": "no_grad",
                        "hidden": shape.hidden,
                        "seq": shape.seq,
                        "batch": a.perf_batch_size,
                        "tp": self.tp,
                    }
                    if skip:
                        entry["skipped"] = skip
                    elif init_error:
                        entry["error"] = init_error
                    else:
                        try:
                            entry.update(self.perf_entry(kind, recipe, shape.hidden, shape.seq))
                        except Exception as exc:  # noqa: BLE001
                            print(traceback.format_exc(), file=sys.stderr, flush=True)
                            entry["error"] = f"{type(exc).__name__}: {exc}"
                        self.probe.clear_hooks()
                        gc.collect()
                        torch.cuda.empty_cache()
                    self.result["performance"].append(entry)
                    self.save()
                    self.log(_perf_line(entry))
            if not why and not init_error:
                self.destroy_ub()

    def perf_entry(self, kind: str, recipe: str, hidden: int, seq: int) -> dict:
        from statistics import median

        a = self.args
        batch = a.perf_batch_size
        recipe_obj = self.make_recipe(recipe)
        torch.manual_seed(a.seed)
        test, ref = self.make_pair(kind, hidden, seq, batch)
        x = torch.randn(seq // self.tp, batch, hidden, dtype=torch.bfloat16, device=self.device)
        self.probe.reset()
        self.probe.watch(test, "test")
        with torch.no_grad():
            for _ in range(a.perf_warmup):
                self.forward(ref, x, recipe_obj)
                self.forward(test, x, recipe_obj)
        torch.cuda.synchronize()
        dist.barrier(group=self.tp_group)
        self.probe.reset()
        t_ref, t_test = [], []
        for _ in range(a.perf_rounds):
            t_ref += self.time_forwards(ref, x, recipe_obj, a.perf_repeats)
            t_test += self.time_forwards(test, x, recipe_obj, a.perf_repeats)
        used = [overlap_counts(kind, r, LNL_UB_NAME)["overlap_used"] for r in self.probe.forwards_of("test")]
        # the slowest rank sets the pace: take the largest statistic over the ranks
        stats = [median(t_ref), median(t_test)]
        stats += [_quantile(t_ref, 0.1), _quantile(t_ref, 0.9), _quantile(t_test, 0.1), _quantile(t_test, 0.9)]
        t_max = torch.tensor(stats, dtype=torch.float64, device=self.device)
        dist.all_reduce(t_max, op=dist.ReduceOp.MAX, group=self.tp_group)
        t_min = torch.tensor([sum(used), len(used)], device=self.device)
        dist.all_reduce(t_min, op=dist.ReduceOp.MIN, group=self.tp_group)
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

    def run(self) -> int:
        self.setup()
        t0 = time.perf_counter()
        self.run_cases()
        self.result["environment"]["cases_seconds"] = round(time.perf_counter() - t0, 1)
        if self.args.perf_shapes:
            t0 = time.perf_counter()
            self.run_perf()
            self.result["environment"]["performance_seconds"] = round(time.perf_counter() - t0, 1)
        self.result["complete"] = True
        self.save()
        self.probe.uninstall()
        dist.barrier()
        dist.destroy_process_group()
        return 0


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def _nccl_version() -> str:
    version = torch.cuda.nccl.version()
    return ".".join(map(str, version)) if isinstance(version, (tuple, list)) else str(version)


def _case_line(case: dict) -> str:
    head = f"{case['module']:<15} {case['recipe']:<20} {case['mode']:<21}"
    if "skipped" in case:
        return f"{head} skipped: {case['skipped']}"
    if "error" in case:
        return f"{head} ERROR {case['error']}"
    per_forward = ", ".join(f"{f['phase']}={'overlap' if f['overlap_used'] else 'no-overlap'}" for f in case["forwards"])
    return (
        f"{head} overlap_used={case['overlap_used']} ({per_forward}) "
        f"matches_reference={case['matches_reference']} max_abs_diff={case['max_abs_diff']} "
        f"bitwise={case['bitwise_equal']}"
    )


def _perf_line(entry: dict) -> str:
    head = f"perf {entry['module']:<15} {entry['recipe']:<20} h={entry['hidden']} s={entry['seq']}"
    if "skipped" in entry:
        return f"{head} skipped: {entry['skipped']}"
    if "error" in entry:
        return f"{head} ERROR {entry['error']}"
    return (
        f"{head} no-overlap {entry['no_overlap_ms']:.3f} ms, overlap {entry['overlap_ms']:.3f} ms, "
        f"speedup {entry['speedup']:.3f}x, overlap_used={entry['overlap_used']}"
    )


def main(argv=None) -> int:
    args = parse_args(argv)
    return Rank(args).run()
