"""Where gradgate spends its time, measured in one process (helper of ``bench.py``).

Usage: ``python benchmarks/stages.py LISTFILE`` where LISTFILE holds one path per line
(relative to the current directory). Prints one JSON object:

* ``import_gradgate_s``: importing the CLI, runner, rules and engine in a fresh
  interpreter; ``libcst_after_import``: whether that imported LibCST (it should not);
* ``config_s`` / ``read_s``: resolving the configuration, reading every file's bytes;
* ``stages``: what a check does, per stage the engine reports, with the number of files,
  their bytes and the seconds spent in ``engine.lint_source`` on them (serially, no
  cache, no worker processes): ``prefilter`` (no grad-mode token: the bytes are searched
  and nothing else) and ``model`` (the engine's ``ast`` stage: parsed with the stdlib and
  the grad-mode model built and judged; LibCST is not used); any other stage a future
  engine reports is kept under its own name;
* ``check_s``: all of that; ``libcst_after_check``: whether the check imported LibCST;
* ``import_libcst_s``: then importing LibCST, which only a fix needs;
* ``fix``: the files with a fixable finding, fixed in memory (``lint_source(fix=True)``:
  the analysis again, then LibCST on the statements the fix changes, then the re-check of
  the fixed text): files, seconds, the seconds beyond their check, and ``cst_lines``
  (``FileResult.cst_lines``: the lines LibCST parsed);
* ``lines`` / ``cst_lines``: the corpus's lines, and how many of them LibCST parsed;
* ``slowest``: the five files whose check took longest, with their stage.

It uses gradgate's internals (``gradgate.engine.lint_source``, ``FileResult.stage``);
when they change shape it prints ``{"error": ...}`` instead of failing the benchmark.
"""

from __future__ import annotations

import json
import sys
import time

#: the engine's stage names, as this report names them
STAGE_NAMES = {"ast": "model"}


def main() -> int:
    try:
        t0 = time.perf_counter()
        import gradgate.cli
        import gradgate.rule
        import gradgate.runner  # noqa: F401
        from gradgate.engine import lint_source

        t1 = time.perf_counter()
        libcst_after_import = "libcst" in sys.modules
        with open(sys.argv[1], encoding="utf-8") as handle:
            paths = [p for p in handle.read().splitlines() if p]
        try:
            from gradgate.settings import resolve

            config = resolve(tuple(paths[:1]) or (".",), None).config
        except Exception:  # noqa: BLE001  older layouts: the default configuration
            from gradgate.config import Config

            config = Config()
        t2 = time.perf_counter()
        blobs = []
        for path in paths:
            with open(path, "rb") as handle:
                blobs.append((path, handle.read()))
        t3 = time.perf_counter()
        stages: dict[str, dict[str, float]] = {}
        lines = 0
        timings = []
        to_fix = []
        for path, data in blobs:
            a = time.perf_counter()
            result = lint_source(path, data, config)
            b = time.perf_counter()
            stage = result.stage or ("error" if result.error else "?")
            stage = STAGE_NAMES.get(stage, stage)
            entry = stages.setdefault(stage, {"files": 0, "seconds": 0.0, "bytes": 0})
            entry["files"] += 1
            entry["seconds"] += b - a
            entry["bytes"] += len(data)
            lines += data.count(b"\n")
            timings.append((b - a, path, stage))
            if any(getattr(f, "fixable", False) for f in result.findings):
                to_fix.append((path, data, b - a))
        t4 = time.perf_counter()
        libcst_after_check = "libcst" in sys.modules
        import libcst  # noqa: F401

        t5 = time.perf_counter()
        fix = {"files": 0, "seconds": 0.0, "beyond_check_s": 0.0, "cst_lines": 0, "changed": 0, "bytes": 0}
        for path, data, check_s in to_fix:
            a = time.perf_counter()
            result = lint_source(path, data, config, fix=True)
            b = time.perf_counter()
            fix["files"] += 1
            fix["seconds"] += b - a
            fix["beyond_check_s"] += (b - a) - check_s
            fix["bytes"] += len(data)
            fix["cst_lines"] += getattr(result, "cst_lines", 0)
            fix["changed"] += bool(getattr(result, "changed", False))
    except Exception as exc:  # noqa: BLE001  the engine changed: say so, do not crash the benchmark
        print(json.dumps({"error": f"{type(exc).__name__}: {exc}"}))
        return 0
    timings.sort(reverse=True)
    print(
        json.dumps(
            {
                "import_gradgate_s": t1 - t0,
                "libcst_after_import": libcst_after_import,
                "config_s": t2 - t1,
                "read_s": t3 - t2,
                "check_s": t4 - t3,
                "stages": stages,
                "libcst_after_check": libcst_after_check,
                "import_libcst_s": t5 - t4,
                "fix": fix,
                "lines": lines,
                "cst_lines": fix["cst_lines"],
                "slowest": [{"path": p, "stage": s, "seconds": t} for t, p, s in timings[:5]],
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
