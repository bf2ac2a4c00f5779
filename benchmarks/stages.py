"""Where gradgate spends its time, measured in one process (helper of ``bench.py``).

Usage: ``python benchmarks/stages.py LISTFILE`` where LISTFILE holds one path per line
(relative to the current directory). Prints one JSON object:

* ``import_libcst_s``: ``import libcst`` in this fresh interpreter;
* ``import_gradgate_s``: then importing the CLI, runner, rules and engine;
* ``read_s``: reading every file's bytes;
* ``stages``: per stage the engine reports (``prefilter``: no grad-mode token;
  ``ast``: stdlib-ast model found no candidate statement; ``snippets`` / ``module``:
  LibCST ran on snippets / the whole file), the number of files and the seconds spent in
  ``engine.lint_source`` on them, serially, no cache, no worker processes;
* ``lines`` / ``cst_lines``: the corpus's lines, and how many of them LibCST parsed
  (``FileResult.cst_lines``; 0 with a gradgate older than that field);
* ``slowest``: the five files that took longest, with their stage.

It uses gradgate's internals (``gradgate.engine.lint_source``, ``FileResult.stage``);
when they change shape it prints ``{"error": ...}`` instead of failing the benchmark.
"""

from __future__ import annotations

import json
import sys
import time


def main() -> int:
    try:
        t0 = time.perf_counter()
        import libcst  # noqa: F401

        t1 = time.perf_counter()
        import gradgate.cli
        import gradgate.rule
        import gradgate.runner  # noqa: F401
        from gradgate.engine import lint_source

        t2 = time.perf_counter()
        with open(sys.argv[1], encoding="utf-8") as handle:
            paths = [p for p in handle.read().splitlines() if p]
        try:
            from gradgate.settings import resolve

            config = resolve(tuple(paths[:1]) or (".",), None).config
        except Exception:  # noqa: BLE001  older layouts: the default configuration
            from gradgate.config import Config

            config = Config()
        t3 = time.perf_counter()
        blobs = []
        for path in paths:
            with open(path, "rb") as handle:
                blobs.append((path, handle.read()))
        t4 = time.perf_counter()
        stages: dict[str, dict[str, float]] = {}
        lines = cst_lines = 0
        timings = []
        for path, data in blobs:
            a = time.perf_counter()
            result = lint_source(path, data, config)
            b = time.perf_counter()
            stage = result.stage or ("error" if result.error else "?")
            entry = stages.setdefault(stage, {"files": 0, "seconds": 0.0, "bytes": 0})
            entry["files"] += 1
            entry["seconds"] += b - a
            entry["bytes"] += len(data)
            lines += data.count(b"\n")
            cst_lines += getattr(result, "cst_lines", 0)
            timings.append((b - a, path, stage))
        t5 = time.perf_counter()
    except Exception as exc:  # noqa: BLE001  the engine changed: say so, do not crash the benchmark
        print(json.dumps({"error": f"{type(exc).__name__}: {exc}"}))
        return 0
    timings.sort(reverse=True)
    print(
        json.dumps(
            {
                "import_libcst_s": t1 - t0,
                "import_gradgate_s": t2 - t1,
                "config_s": t3 - t2,
                "read_s": t4 - t3,
                "lint_s": t5 - t4,
                "stages": stages,
                "lines": lines,
                "cst_lines": cst_lines,
                "slowest": [{"path": p, "stage": s, "seconds": t} for t, p, s in timings[:5]],
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
