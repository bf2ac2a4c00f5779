"""Turn per-run harness results into report.json, report.md, speedup.png and verdict lines.

Pure Python (matplotlib optional, imported only to draw the plot); no torch.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .cases import MODES, MODULES, RECIPES, TE_VARIANTS

REPORT_JSON = "report.json"
REPORT_MD = "report.md"
REPORT_PNG = "speedup.png"

# Upstream figures quoted for comparison (TransformerEngine PR #3546, the #2902 fix).
UPSTREAM_FIGURES = (
    "+12 to 14% BF16 on A100 and +21 to 22% FP8 on H100 at TP=4, hidden 4096, sequence 8192; "
    "a net loss at hidden and sequence <= 2048"
)


# -- merging ----------------------------------------------------------------------------
def merge_runs(
    runs: dict[str, dict],
    *,
    command: str,
    fix: dict | None = None,
    run_errors: dict[str, str] | None = None,
    settings: dict | None = None,
) -> dict:
    """Combine the rank-0 results of the stock and/or fixed runs into one report dict."""
    run_errors = dict(run_errors or {})
    environment: dict = {}
    for variant in TE_VARIANTS:
        env = runs.get(variant, {}).get("environment") or {}
        for key, value in env.items():
            if key not in ("transformer_engine_path", "cases_seconds", "performance_seconds"):
                environment.setdefault(key, value)
    environment["transformer_engine_paths"] = {
        v: runs[v].get("environment", {}).get("transformer_engine_path") for v in TE_VARIANTS if v in runs
    }
    for variant in TE_VARIANTS:
        if variant in runs and not runs[variant].get("complete") and variant not in run_errors:
            run_errors[variant] = "run did not complete"
    cases, performance = [], []
    for variant in TE_VARIANTS:
        cases += runs.get(variant, {}).get("cases", [])
        performance += runs.get(variant, {}).get("performance", [])
    return {
        "command": command,
        "environment": environment,
        "settings": settings or {},
        "fix": fix,
        "run_errors": run_errors,
        "cases": cases,
        "performance": performance,
    }


# -- verdicts ---------------------------------------------------------------------------
def _phases_without_overlap(case: dict) -> list[str]:
    return [f["phase"] for f in case.get("forwards", []) if not f.get("overlap_used")]


def _diff_text(case: dict) -> str:
    if case.get("bitwise_equal"):
        return "bitwise equal to the reference"
    tol = case.get("tolerance") or {}
    return f"max |diff| {case.get('max_abs_diff')} (atol {tol.get('atol')}, rtol {tol.get('rtol')})"


def case_verdict(case: dict) -> tuple[str, str]:
    """(status, explanation). Status: PASS, FAIL, ERROR, SKIP, BUG (stock reproduces #2902), OK."""
    if "skipped" in case:
        return "SKIP", f"skipped: {case['skipped']}"
    if "error" in case:
        return "ERROR", case["error"]
    if case.get("reference_userbuffers_calls"):
        return "FAIL", (
            f"the non-overlap reference module made {case['reference_userbuffers_calls']} UserBuffers calls: "
            "the comparison is not against a plain NCCL path"
        )
    matches = bool(case.get("matches_reference"))
    overlap = bool(case.get("overlap_used"))
    forwards = case.get("forwards", [])
    taken = sum(1 for f in forwards if f.get("overlap_used"))
    path = f"overlap path taken in {taken}/{len(forwards)} forwards"
    if case.get("te") == "fixed":
        if overlap and matches:
            return "PASS", f"{path}; {_diff_text(case)}"
        problems = []
        if not overlap:
            problems.append(f"overlap path NOT taken in {', '.join(_phases_without_overlap(case)) or 'any forward'}")
        if not matches:
            problems.append(f"diverges from the reference: {_diff_text(case)}")
        return "FAIL", "; ".join(problems)
    # stock TE
    if not matches:
        return "FAIL", f"{path}; diverges from the reference: {_diff_text(case)}"
    if overlap:
        return "OK", f"{path} (no grad-mode gating seen); {_diff_text(case)}"
    no_grad_phases = [f["phase"] for f in forwards if not f.get("overlap_used") and not f.get("grad_enabled")]
    grad_phases = [f["phase"] for f in forwards if not f.get("overlap_used") and f.get("grad_enabled")]
    if grad_phases:
        return "FAIL", (
            f"{path}; overlap not taken even with grad enabled ({', '.join(grad_phases)}): "
            "the harness cannot observe the overlap path"
        )
    return "BUG", (
        f"{path}: requested overlap silently dropped under no_grad ({', '.join(no_grad_phases)}) "
        f"- TE #2902 reproduced; {_diff_text(case)}"
    )


def perf_verdict(entry: dict) -> tuple[str, str]:
    if "skipped" in entry:
        return "SKIP", f"skipped: {entry['skipped']}"
    if "error" in entry:
        return "ERROR", entry["error"]
    text = (
        f"no overlap {entry['no_overlap_ms']:.3f} ms, overlap {entry['overlap_ms']:.3f} ms, "
        f"speedup {entry['speedup']:.3f}x"
    )
    if not entry.get("overlap_used"):
        status = "FAIL" if entry.get("te") == "fixed" else "BUG"
        return status, text + " - overlap path NOT taken in the timed forwards"
    return "OK", text


def _case_label(case: dict) -> str:
    return f"{case['te']:<5} {case['module']:<15} {case['recipe']:<20} {case['mode']:<20}"


def verdict_lines(report: dict) -> list[str]:
    lines = []
    for case in report["cases"]:
        status, text = case_verdict(case)
        lines.append(f"{status:<5} {_case_label(case)} {text}")
    for entry in report.get("performance", []):
        status, text = perf_verdict(entry)
        if status in ("FAIL", "BUG", "ERROR"):
            label = (
                f"{entry['te']:<5} {entry['module']:<15} {entry['recipe']:<20} perf {entry['hidden']}x{entry['seq']}"
            )
            lines.append(f"{status:<5} {label} {text}")
    for variant, error in (report.get("run_errors") or {}).items():
        lines.append(f"ERROR {variant:<5} run: {error}")
    lines.append(summary_line(report))
    return lines


def failures(report: dict) -> list[str]:
    out = []
    for case in report["cases"]:
        status, text = case_verdict(case)
        if status in ("FAIL", "ERROR"):
            out.append(f"{_case_label(case).strip()}: {text}")
    for entry in report.get("performance", []):
        status, text = perf_verdict(entry)
        if status == "FAIL":
            out.append(f"perf {entry['module']} {entry['recipe']} {entry['hidden']}x{entry['seq']}: {text}")
    for variant, error in (report.get("run_errors") or {}).items():
        out.append(f"{variant} run: {error}")
    return out


def summary_line(report: dict) -> str:
    counts: dict[str, int] = {}
    for case in report["cases"]:
        status, _ = case_verdict(case)
        counts[status] = counts.get(status, 0) + 1
    parts = ", ".join(f"{counts[s]} {s}" for s in ("PASS", "FAIL", "ERROR", "BUG", "OK", "SKIP") if s in counts)
    overall = "FAIL" if failures(report) else "PASS"
    return f"{overall} overall: {parts or 'no cases'}"


def exit_code(report: dict) -> int:
    """0 when nothing failed; 1 when the fixed TE misses the overlap path, a module diverges
    from its reference, a case errors or a run does not complete."""
    return 1 if failures(report) else 0


# -- markdown ---------------------------------------------------------------------------
def _fmt_diff(value) -> str:
    if value is None:
        return "n/a"
    if value == 0:
        return "0"
    return f"{value:.3g}"


def _yes(flag) -> str:
    return "yes" if flag else "**no**"


def _index(cases: list[dict]) -> dict:
    return {(c["module"], c["recipe"], c["mode"], c["te"]): c for c in cases}


def _ordered_keys(cases: list[dict]) -> list[tuple[str, str, str]]:
    seen = {(c["module"], c["recipe"], c["mode"]) for c in cases}
    return [(m, r, mode) for r in RECIPES for m in MODULES for mode in MODES if (m, r, mode) in seen]


def _overall_verdict(report: dict) -> str:
    fails = failures(report)
    fixed = [c for c in report["cases"] if c.get("te") == "fixed" and "skipped" not in c]
    stock_bug = [c for c in report["cases"] if c.get("te") == "stock" and case_verdict(c)[0] == "BUG"]
    stock = [c for c in report["cases"] if c.get("te") == "stock" and "skipped" not in c]
    parts = []
    if fails:
        parts.append(f"**FAIL**: {len(fails)} problem(s), listed below.")
    else:
        parts.append("**PASS**.")
    if fixed:
        ok = sum(1 for c in fixed if case_verdict(c)[0] == "PASS")
        parts.append(
            "Fixed TE (gradgate autofix): overlap path taken and output matching the reference in "
            f"{ok}/{len(fixed)} cases."
        )
    if stock:
        parts.append(
            "Stock TE: requested overlap dropped under no_grad (TE #2902 reproduced) in "
            f"{len(stock_bug)}/{len(stock)} cases."
        )
    return " ".join(parts)


#: what each mode runs, as the report's "What was checked" section says it
MODE_TEXT = {
    "no_grad": "`no_grad` (forward under `torch.no_grad()`)",
    "grad": "`grad` (forward + backward)",
    "checkpoint_reentrant": (
        "`checkpoint_reentrant` (`torch.utils.checkpoint.checkpoint(..., use_reentrant=True)`: a first forward "
        "under no_grad, then a recompute with grad during backward; both must take the overlap path)"
    ),
    "checkpoint_non_reentrant": (
        "`checkpoint_non_reentrant` (`torch.utils.checkpoint.checkpoint(..., use_reentrant=False)`, early stop off: "
        "a first forward with grad, then a full recompute with grad during backward; both must take the overlap path)"
    ),
}


def _header_section(report: dict) -> list[str]:
    return [
        "# gradgate harness report: UserBuffers overlap under grad modes (TransformerEngine #2902)",
        "",
        _overall_verdict(report),
        "",
        "Produced by:",
        "",
        "```",
        report["command"],
        "```",
        "",
    ]


def _environment_section(env: dict) -> list[str]:
    out = ["## Environment", "", "| | |", "| --- | --- |"]
    rows = [
        (
            "GPUs (= TP size)",
            f"{env.get('gpus')} x {env.get('gpu_name')} (compute capability {env.get('compute_capability')})",
        ),
        ("torch", f"{env.get('torch')} (CUDA {env.get('cuda')}, NCCL {env.get('nccl')})"),
        ("transformer_engine", env.get("transformer_engine")),
        ("python", env.get("python")),
    ]
    for variant, path in (env.get("transformer_engine_paths") or {}).items():
        rows.append((f"TE imported by the {variant} run", f"`{path}`"))
    for key, value in (env.get("env") or {}).items():
        rows.append((f"`{key}`", f"`{value}`" if value is not None else "unset"))
    out += [f"| {key} | {value} |" for key, value in rows]
    out.append("")
    return out


def _checked_section(report: dict) -> list[str]:
    settings = report.get("settings") or {}
    shape = settings.get("cases_shape") or {}
    modes = [m for m in MODES if m in (settings.get("modes") or MODES)]
    return [
        "## What was checked",
        "",
        "Each case builds the module with the overlap requested and a reference module without it, "
        "copies the weights over (bitwise equal), runs both on the same sequence-parallel input shard "
        f"(global sequence {shape.get('seq', '?')}, batch {shape.get('batch', '?')}, "
        f"hidden {shape.get('hidden', '?')}, BF16 parameters) and compares the output and, where there is a "
        "backward, the input and every parameter gradient.",
        "",
        '- `te.LayerNormLinear(hidden, 3*hidden, parallel_mode="column", sequence_parallel=True, '
        'ub_overlap_ag=True, ub_name="qkv")`',
        "- `te.LayerNormMLP(hidden, 4*hidden, set_parallel_mode=True, sequence_parallel=True, "
        "ub_overlap_ag=True, ub_overlap_rs=True)`",
        f"- Modes: {', '.join(MODE_TEXT[m] for m in modes)}.",
        "- Overlap path observed, not timed: TE's `fill_userbuffers_buffer_for_all_gather`, `get_ub` and "
        "`general_gemm` are wrapped in the `layernorm_linear` / `layernorm_mlp` module namespaces and calls are "
        "counted per forward. A forward took the all-gather overlap when it filled the `qkv_fprop` (LayerNormLinear) "
        "or `fc1_fprop` (LayerNormMLP) UserBuffers buffer and ran the GEMM with `ub_type=AG` on it; LayerNormMLP "
        "also needs a `ub_type=RS` GEMM on `fc2_fprop` (reduce-scatter overlap).",
        "- Match: BF16 must be bitwise equal; FP8 within |test - ref| <= atol + rtol * |ref| elementwise, "
        "atol 0.0625, rtol 0.125 (the tolerances of TE's own overlap test). "
        "Differences are the largest over all ranks.",
        "",
    ]


def _fix_section(fix: dict | None) -> list[str]:
    if not fix:
        return []
    run = fix.get("run") or {}
    overlay = fix.get("overlay") or {}
    out = [
        "## The fix under test",
        "",
        f"The `fixed` run imports an overlay of the installed `transformer_engine` at `{overlay.get('root')}` "
        f"(shared libraries symlinked: {len(overlay.get('shared_libraries_linked') or [])}; "
        "every other file copied), fixed by gradgate itself:",
        "",
        "```",
        " ".join(run.get("command") or []),
        "```",
        "",
    ]
    removed = " (a temporary folder, removed after the run)" if fix.get("overlay_removed_after_run") else ""
    out += [
        f"Exit code {run.get('exit_code')} ({run.get('meaning')}). Findings before the fix: "
        f"{_count(run.get('findings_before'))}; after: {_count(run.get('findings_after'))}. "
        f"Lines changed in the overlay{removed}, diffed against the installed package:",
        "",
    ]
    for changed in fix.get("changed_files") or []:
        spans = "; ".join(f"lines {_span(h['original'])} -> {_span(h['fixed'])}" for h in changed.get("hunks", []))
        out.append(f"- `{changed['path']}`: {spans}")
    out += ["", "```diff"]
    out += [changed.get("diff", "").rstrip("\n") for changed in fix.get("changed_files") or []]
    out += ["```", ""]
    return out


def _result_columns(case: dict | None) -> tuple[str, str]:
    if case is None:
        return ("-", "-")
    if "error" in case:
        return ("error", "error")
    return (_forwards_text(case), "bitwise" if case.get("bitwise_equal") else _yes(case.get("matches_reference")))


def _results_section(report: dict) -> list[str]:
    cases = report["cases"]
    index = _index(cases)
    out = [
        "## Results",
        "",
        "| module | recipe | mode | stock TE: overlap taken | stock: matches ref | fixed TE: overlap taken | "
        "fixed: matches ref | max abs diff (stock / fixed) | verdict (stock / fixed) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    skipped_rows = []
    for module, recipe, mode in _ordered_keys(cases):
        stock = index.get((module, recipe, mode, "stock"))
        fixed = index.get((module, recipe, mode, "fixed"))
        any_case = stock or fixed
        if any_case is None:
            continue
        if "skipped" in any_case:
            skipped_rows.append((module, recipe, mode, any_case["skipped"]))
            continue
        s_over, s_match = _result_columns(stock)
        f_over, f_match = _result_columns(fixed)
        diffs = " / ".join(_fmt_diff(c.get("max_abs_diff")) if c else "-" for c in (stock, fixed))
        verdicts = " / ".join(case_verdict(c)[0] if c else "-" for c in (stock, fixed))
        out.append(
            f"| {module} | {recipe} | {mode} | {s_over} | {s_match} | {f_over} | {f_match} | {diffs} | {verdicts} |"
        )
    checkpointing = "checkpointing has a first forward under no_grad and a recompute with grad"
    if any(c["mode"] == "checkpoint_non_reentrant" for c in cases):
        checkpointing = (
            "reentrant checkpointing has a first forward under no_grad and a recompute with grad; "
            "non-reentrant checkpointing runs both with grad"
        )
    out += [
        "",
        f"Overlap column: which forwards took the overlap path ({checkpointing}). `bitwise`: output and gradients "
        "equal the reference bit for bit. BUG = stock TE drops the requested overlap under no_grad (#2902 reproduced); "
        "PASS = fixed TE takes it and matches.",
        "",
    ]
    if skipped_rows:
        out += ["Skipped:", ""]
        grouped: dict[tuple[str, str], list[str]] = {}
        for module, recipe, mode, why in skipped_rows:
            grouped.setdefault((recipe, why), []).append(f"{module}/{mode}")
        for (recipe, why), which in grouped.items():
            out.append(f"- {recipe} ({len(which)} cases: {', '.join(which)}): {why}")
        out.append("")
    fails = failures(report)
    if fails:
        out += ["### Problems", ""]
        out += [f"- {line}" for line in fails]
        out.append("")
    return out


def _calls_section(report: dict) -> list[str]:
    cases = report["cases"]
    index = _index(cases)
    out = [
        "### Calls counted per forward",
        "",
        "| te | module | recipe | mode | forward | grad enabled | AG buffer fills | AG GEMMs | RS GEMMs | overlap |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for variant in TE_VARIANTS:
        for module, recipe, mode in _ordered_keys(cases):
            c = index.get((module, recipe, mode, variant))
            if not c or "skipped" in c or "error" in c:
                continue
            for f in c.get("forwards", []):
                out.append(
                    f"| {variant} | {module} | {recipe} | {mode} | {f['phase']} | {f['grad_enabled']} | "
                    f"{f.get('ag_fill_calls', '-')} | {f.get('ag_gemm_calls', '-')} | {f.get('rs_gemm_calls', '-')} | "
                    f"{'yes' if f.get('overlap_used') else 'no'} |"
                )
    out.append("")
    return out


def _performance_section(perf: list[dict], png_name: str | None, png_note: str | None) -> list[str]:
    if not perf:
        return []
    p0 = next((p for p in perf if "skipped" not in p), perf[0])
    out = [
        "## Performance: forward under no_grad, overlap vs no overlap",
        "",
        f"TE: {p0.get('te')}. TP={p0.get('tp')}, batch {p0.get('batch')}; LayerNormLinear is hidden -> 3*hidden "
        "(column-parallel), LayerNormMLP hidden -> 4*hidden -> hidden. Time per forward from CUDA events after "
        f"{p0.get('warmup', '?')} warm-up forwards, median of {p0.get('repeats', '?')} forwards (the largest median "
        "over the ranks). Speedup = no-overlap time / overlap time.",
        "",
        "| module | recipe | hidden | sequence | no overlap (ms) | overlap (ms) | speedup | overlap path taken |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for e in perf:
        head = f"| {e['module']} | {e['recipe']} | {e['hidden']} | {e['seq']} |"
        if "skipped" in e or "error" in e:
            out.append(f"{head} - | - | - | {e.get('skipped') or 'error: ' + e.get('error', '')} |")
            continue
        out.append(
            f"{head} {_ms(e, 'no_overlap_ms')} | {_ms(e, 'overlap_ms')} | {e['speedup']:.3f}x "
            f"({(e['speedup'] - 1) * 100:+.1f}%) | {'yes' if e.get('overlap_used') else '**no**'} "
            f"({e.get('timed_forwards')} forwards) |"
        )
    if any(f"{k}_p10_p90" in e for e in perf for k in ("no_overlap_ms", "overlap_ms")):
        out += ["", "Times are medians; brackets give the 10th-90th percentile range of the per-forward times."]
    out += ["", f"Upstream PR #3546 reported {UPSTREAM_FIGURES}.", ""]
    if png_name:
        out.append(f"![speedup of the overlap path under no_grad]({png_name})")
    elif png_note:
        out.append(f"(No plot: {png_note}.)")
    out.append("")
    return out


def render_markdown(report: dict, png_name: str | None = REPORT_PNG, png_note: str | None = None) -> str:
    """report.md: verdict and command, environment, what was checked, the fix, results, the
    calls counted per forward and (if measured) the performance table and plot."""
    out = [
        *_header_section(report),
        *_environment_section(report["environment"]),
        *_checked_section(report),
        *_fix_section(report.get("fix")),
        *_results_section(report),
        *_calls_section(report),
        *_performance_section(report.get("performance") or [], png_name, png_note),
    ]
    return "\n".join(out).rstrip("\n") + "\n"


def _ms(entry: dict, key: str) -> str:
    spread = entry.get(f"{key}_p10_p90")
    text = f"{entry[key]:.3f}"
    return f"{text} [{spread[0]:.3f}-{spread[1]:.3f}]" if spread else text


def _count(findings) -> str:
    return "unknown" if findings is None else str(len(findings))


def _span(r) -> str:
    first, last = r
    if last < first:
        return f"(none, before {first})"
    return f"{first}" if first == last else f"{first}-{last}"


def _forwards_text(case: dict) -> str:
    forwards = case.get("forwards", [])
    if not forwards:
        return "**no forward seen**"
    if len(forwards) == 1:
        return "yes" if forwards[0].get("overlap_used") else "**no**"
    return ", ".join(f"{f['phase']}: {'yes' if f.get('overlap_used') else '**no**'}" for f in forwards)


# -- plot -------------------------------------------------------------------------------
def render_plot(report: dict, path: Path) -> str | None:
    """Draw the speedup bar chart to ``path``. Returns None when written, else why not."""
    perf = [e for e in report.get("performance") or [] if "speedup" in e]
    if not perf:
        return "no performance measurements"
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib is not importable"

    shapes = []
    for e in perf:
        key = (e["hidden"], e["seq"])
        if key not in shapes:
            shapes.append(key)
    series = []
    for e in perf:
        key = (e["module"], e["recipe"])
        if key not in series:
            series.append(key)
    fig, ax = plt.subplots(figsize=(max(7.0, 1.3 * len(shapes) + 3), 4.8), dpi=120)
    width = 0.8 / max(1, len(series))
    lookup = {(e["module"], e["recipe"], e["hidden"], e["seq"]): e for e in perf}
    for i, (module, recipe) in enumerate(series):
        xs, ys = [], []
        for j, (hidden, seq) in enumerate(shapes):
            e = lookup.get((module, recipe, hidden, seq))
            if e:
                xs.append(j - 0.4 + width * (i + 0.5))
                ys.append(e["speedup"])
        bars = ax.bar(xs, ys, width=width * 0.95, label=f"{module} {recipe}")
        for x, y in zip(xs, ys):
            ax.annotate(
                f"{y:.2f}", (x, y), ha="center", va="bottom", fontsize=7, xytext=(0, 1), textcoords="offset points"
            )
        del bars
    ax.axhline(1.0, color="black", linewidth=0.8, linestyle="--")
    ax.set_xticks(range(len(shapes)))
    ax.set_xticklabels([f"h={h}\ns={s}" for h, s in shapes])
    ys_all = [e["speedup"] for e in perf]
    lo, hi = min([*ys_all, 1.0]), max([*ys_all, 1.0])
    pad = max(0.02, (hi - lo) * 0.15)
    ax.set_ylim(max(0.0, lo - pad), hi + pad)
    ax.set_ylabel("speedup (no-overlap time / overlap time)")
    env = report.get("environment") or {}
    te = perf[0].get("te")
    ax.set_title(
        f"Forward under torch.no_grad(): UserBuffers overlap vs NCCL\n"
        f"{env.get('gpus')} x {env.get('gpu_name')}, TP={perf[0].get('tp')}, TE {env.get('transformer_engine')} ({te})",
        fontsize=10,
    )
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2, frameon=False)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return None


# -- writing ----------------------------------------------------------------------------
def write_report(report: dict, output: Path) -> dict[str, Any]:
    """Write report.json, speedup.png (if possible) and report.md into ``output``."""
    output = Path(output)
    output.mkdir(parents=True, exist_ok=True)
    json_path = output / REPORT_JSON
    json_path.write_text(json.dumps(report, indent=2, allow_nan=False) + "\n")
    png_path = output / REPORT_PNG
    note = render_plot(report, png_path)
    if note is None:
        report_png = png_path
        md = render_markdown(report, png_name=REPORT_PNG)
    else:
        report_png = None
        md = render_markdown(report, png_name=None, png_note=note)
    md_path = output / REPORT_MD
    md_path.write_text(md)
    return {"json": json_path, "md": md_path, "png": report_png, "png_note": note}


def load_report(path: Path) -> dict:
    report = json.loads(Path(path).read_text())
    for key in ("environment", "cases", "performance"):
        if key not in report:
            raise ValueError(f"{path}: not a harness report (no {key!r})")
    return report
