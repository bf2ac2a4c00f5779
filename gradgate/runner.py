"""Running the engine over many files: discovery, the cache, and worker processes.

:func:`run` yields one :class:`~gradgate.engine.FileResult` per discovered file, in
discovery order whatever the parallelism. Files are read once, in this process; those
the bytes pre-filter drops cost nothing more; the rest are looked up in the cache and,
when missing, analysed here or, when there are many, by a pool of worker processes.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from .config import Config
from .discovery import discover
from .engine import FileResult, lint_source, may_hold_findings
from .source import SourceError, read_source
from .suppression import file_ignored_bytes

#: below this many files to analyse, a pool costs more than it saves
PARALLEL_THRESHOLD = 8


@dataclass(frozen=True)
class RunOptions:
    fix: bool = False
    prefilter: bool = True
    cache_dir: str | None = None  # None: no cache
    jobs: int | None = None  # None: one per CPU
    #: the folder ``per-file-ignores`` globs are relative to
    root: str | None = None
    #: apply unsafe fixes too (``--unsafe-fixes``)
    unsafe_fixes: bool = False


def _per_file_ignored(result: FileResult, config: Config, root: str | None) -> FileResult:
    if not config.per_file_ignores or not result.findings:
        return result
    import fnmatch
    from dataclasses import replace

    path = os.path.relpath(os.path.abspath(result.path), root or os.getcwd()).replace(os.sep, "/")
    ignored = {
        code
        for pattern, codes in config.per_file_ignores
        if fnmatch.fnmatch(path, pattern) or fnmatch.fnmatch(os.path.basename(path), pattern)
        for code in codes
    }
    if not ignored:
        return result
    kept = tuple(f for f in result.findings if not any(f.rule.startswith(c) for c in ignored))
    return replace(result, findings=kept)


def _analyse(job: tuple[str, bytes, Config, bool, bool, bool]) -> FileResult:
    path, data, config, fix, prefilter, unsafe_fixes = job
    return lint_source(path, data, config, fix=fix, prefilter=prefilter, unsafe_fixes=unsafe_fixes)


def _workers(options: RunOptions, pending: int) -> int:
    jobs = options.jobs if options.jobs is not None else (os.cpu_count() or 1)
    return max(1, min(jobs, pending // 2 or 1))


def run(
    paths: Sequence[str],
    config: Config,
    options: RunOptions = RunOptions(),
    progress: Callable[[int, int], None] | None = None,
) -> Iterator[FileResult]:
    discovered = list(discover(paths, config.exclude))
    total = len(discovered)
    cache = None
    if options.cache_dir is not None and not options.fix and options.prefilter:
        from .cache import ResultCache, content_key

        cache = ResultCache(options.cache_dir, config)

    results: list[FileResult | None] = [None] * total
    pending: list[tuple[int, str | None, tuple]] = []
    for index, item in enumerate(discovered):
        if item.error is not None:
            results[index] = FileResult(item.path, error=item.error)
            continue
        try:
            data = read_source(item.path).data
        except SourceError as exc:
            results[index] = FileResult(item.path, error=str(exc))
            continue
        if file_ignored_bytes(data):  # `# gradgate: ignore-file`
            results[index] = FileResult(item.path, source=data, stage="ignored")
            continue
        if options.prefilter and not may_hold_findings(data, config):
            results[index] = FileResult(item.path, source=data, stage="prefilter")
            continue
        key = None
        if cache is not None:
            key = content_key(data)
            hit = cache.get(key, item.path, data)
            if hit is not None:
                results[index] = hit
                continue
        pending.append((index, key, (item.path, data, config, options.fix, options.prefilter,
                                       options.unsafe_fixes)))

    done = total - len(pending)
    workers = _workers(options, len(pending))
    if len(pending) < PARALLEL_THRESHOLD or workers == 1:
        computed: Iterator[FileResult] = map(_analyse, (job for _, _, job in pending))
        pool = None
    else:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        method = "fork" if "fork" in multiprocessing.get_all_start_methods() else None
        pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context(method))
        chunk = max(1, len(pending) // (workers * 4))
        computed = pool.map(_analyse, (job for _, _, job in pending), chunksize=chunk)
    try:
        next_out = 0
        for (index, key, _), result in zip(pending, computed):
            results[index] = result
            if cache is not None and key is not None:
                cache.put(key, result)
            done += 1
            if progress is not None:
                progress(done, total)
            while next_out < total and results[next_out] is not None:
                yield _per_file_ignored(results[next_out], config, options.root)  # type: ignore[arg-type]
                next_out += 1
        while next_out < total:
            yield _per_file_ignored(results[next_out], config, options.root)  # type: ignore[arg-type]
            next_out += 1
    finally:
        if pool is not None:
            pool.shutdown(cancel_futures=True)
        if cache is not None:
            cache.save()
