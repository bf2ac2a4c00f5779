"""Running the engine over many files: discovery, the cache, and worker processes.

:func:`run` yields one :class:`~gradgate.engine.FileResult` per discovered file, in
discovery order whatever the parallelism. With a cache, a file whose status (size, mtime,
inode, ctime) is unchanged is not even read; the others are read once, in this process.
Those the bytes pre-filter drops cost nothing more (the cache keeps them by status, not
by a digest of their bytes); the rest are analysed here or, when their expected cost
(:func:`analysis_seconds`) pays for it, by a pool of worker processes that die with this
one. Results keep the file's bytes only where they have findings or a fix.
"""

from __future__ import annotations

import bisect
import gc
import itertools
import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Protocol

from .config import Config
from .discovery import Discovered, discover
from .learned import NOTHING, Learned, learn
from .prefilter import may_hold_findings
from .records import record, replace
from .results import FileResult, Finding, Notice
from .source import SourceError, SourceFile, read_source, syntax_error
from .suppression import file_ignored_bytes

if TYPE_CHECKING:
    from .cache import ResultCache
    from .model.project import Project

#: below this many files to analyse, a pool costs more than it saves
PARALLEL_THRESHOLD = 4


@record
class RunOptions:
    fix: bool = False
    prefilter: bool = True
    cache_dir: str | None = None  # None: no cache
    jobs: int | None = None  # None: one per CPU
    #: the folder ``per-file-ignores`` globs are relative to
    root: str | None = None
    #: apply the unsafe fixes too (with ``fix``)
    unsafe_fixes: bool = False
    #: give each fixable finding its text edit (JSON, SARIF, ``--show-fixes``) in the
    #: analysis that finds it, not in a second one
    edits: bool = False
    #: the files (absolute) named on the command line, not found in a folder: asked
    #: against the modules outside the run they import too (:func:`_outside_pass`)
    named: frozenset[str] = frozenset()
    #: a fix leaves alone the findings this says are known (a baseline's,
    #: :class:`gradgate.baseline.Known`); None: every fixable finding is fixed
    known: Callable[[Finding], bool] | None = None


def lint_source(path: str, data: bytes, config: Config, **options: object) -> FileResult:
    """:func:`gradgate.engine.lint_source`, imported when a file is first analysed: a
    run whose every file comes from the cache imports neither the engine nor its
    model (20 ms of a 0.1 s warm run)."""
    from .engine import lint_source as analyse

    return analyse(path, data, config, **options)  # type: ignore[arg-type]


def _lean(result: FileResult) -> FileResult:
    """``result`` without the file's bytes where nothing needs them (no finding, no fix):
    a run's memory then grows with its findings, not with the corpus."""
    if result.source is None or result.findings or result.fixed is not None:
        return result
    from .records import replace

    return replace(result, source=None)


#: the project of the run this process analyses files of, by the run's paths (kept
#: until the next run starts)
_PROJECTS: dict[tuple[str, ...], Project] = {}


def _project(config: Config, paths: tuple[str, ...]) -> Project:
    """The run's modules (:mod:`gradgate.model.project`), one per process and run."""
    found = _PROJECTS.get(paths)
    if found is None or found.config is not config:
        from .model.project import Project

        _PROJECTS.clear()
        found = _PROJECTS[paths] = Project(config, paths)
    return found


@contextmanager
def collector_paused() -> Iterator[None]:
    """The cyclic garbage collector off inside the ``with`` block (as it was before it).

    An analysis allocates its tree and model in bulk (CPython's ``ast.parse`` alone makes
    a node object per name, a million for a 100,000-line file), and all of it lives
    until the analysis ends, when reference counting frees it: the collector's passes
    meanwhile scan those objects again and again and find no garbage (0.44 s of a 3.5 s
    ``fix`` of that file; 15 % of a ``--no-prefilter`` run over TransformerEngine)."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


#: source bytes a run analyses between two passes of the cyclic collector it runs itself
COLLECT_EVERY_BYTES = 4_000_000
_uncollected_bytes = 0


def _collect_now_and_then(size: int) -> None:
    """Count ``size`` analysed bytes; where the collector is off (a run, and its forked
    workers), run one pass of it once every :data:`COLLECT_EVERY_BYTES` of them.

    A run keeps the collector off from its start to its end, not only during each file:
    re-enabled between files, it ran a pass after every one of them, each scanning
    every object the run's project holds (the modules parsed for their summaries) and
    finding little (0.1 s of a 0.9 s check of TransformerEngine, 25 passes). The cycles
    an analysis leaves (it should leave none: a test checks) are collected here in bulk
    instead: on a TransformerEngine check (1.3 MB analysed) that is no pass at all."""
    global _uncollected_bytes
    if gc.isenabled():
        return  # the collector runs on its own (the language server)
    _uncollected_bytes += size
    if _uncollected_bytes >= COLLECT_EVERY_BYTES:
        _uncollected_bytes = 0
        # the young generation only: what was made since the last pass. A full pass
        # walks every tree the project keeps, again (0.3 s each on transformers)
        gc.collect(0)


Job = tuple[
    str,
    bytes,
    Config,
    bool,
    bool,
    bool,
    bool,
    tuple[str, ...],
    frozenset[bytes],
    frozenset[str],
    str | None,
    Callable[[Finding], bool] | None,
]


def _job(
    path: str,
    data: bytes,
    config: Config,
    options: RunOptions,
    roots: tuple[str, ...],
    also: frozenset[bytes] = frozenset(),
    analysed: frozenset[str] = frozenset(),
) -> Job:
    """What :func:`_analyse` needs for one file; ``analysed``: the files of the run that
    reach analysis (absolute paths), which a module that consults them parses whole."""
    return (
        path,
        data,
        config,
        options.fix,
        options.prefilter,
        options.unsafe_fixes,
        options.edits,
        roots,
        also,
        analysed,
        options.root,
        options.known if options.fix else None,
    )


def within_bound(path: str, data: bytes, work: Callable[[], FileResult]) -> FileResult:
    """``work``'s result for the file ``path``, or, where it runs past the per-file time
    or memory bound (:mod:`gradgate.deadline`), the file reported as not analysed (a
    notice)."""
    from .deadline import FileOverMemory, FileTimeout, deadline, file_megabytes, file_seconds, memory_bound

    seconds, megabytes = file_seconds(), file_megabytes()
    try:
        with deadline(seconds), memory_bound(megabytes):
            return work()
    except FileTimeout:
        what = f"file not analysed (past the per-file bound of {seconds:g} s)"
    except FileOverMemory:
        what = f"file not analysed (past the per-file memory bound of {megabytes:g} MB)"
    _PROJECTS.clear()  # a summary may have been cut short, and what it held goes: the next file starts afresh
    return FileResult(path, source=data, stage="ast", notices=(Notice(path, 0, what),))


def _analyse(job: Job) -> FileResult:
    path, data, config, fix, prefilter, unsafe_fixes, edits, paths, also, analysed, root, known = job
    project = _project(config, paths)
    project.note_returns(name.decode() for name in also)
    project.expect(analysed)
    with collector_paused():
        result = within_bound(
            path,
            data,
            lambda: lint_source(
                path,
                data,
                config.for_file(path, root),  # its per-file-ignores: neither reported nor fixed
                fix=fix,
                prefilter=prefilter,
                unsafe_fixes=unsafe_fixes,
                edits=edits,
                project=project,
                also=also,
                known=known,
            ),
        )
    _collect_now_and_then(len(data))
    return _lean(result)


#: what one more process costs: its fork, and the modules its files call that another
#: process parses too (TransformerEngine's 18 files in two shares: 0.02 s more
#: CPU than in one process)
WORKER_START_S = 0.05
#: and where it makes fixes or their edits: LibCST imported again in it
WORKER_LIBCST_S = 0.2
#: how fast one process parses and indexes a file that passes the pre-filter, the
#: modules it calls included (bytes per second), and what interpreting the functions
#: around one spelled grad-mode read costs: fitted to one process's analysis of the
#: files that pass the pre-filter in TransformerEngine 2.20.2 (18 files, 1.27 MB, 144
#: reads: 0.45 s) and transformers 5.24.0 (12 files, 489 kB, 17 reads: 0.13 s); by size
#: alone transformers' files looked like a third of TE's work, not a fifth, and got two
#: workers that made its check slower
PARSE_BYTES_PER_S = 4_500_000
SECONDS_PER_READ = 0.0015


def analysis_seconds(data: bytes, config: Config) -> float:
    """What analysing a file that passed the pre-filter is expected to cost, from its
    bytes: parsing by their size, interpreting by the grad-mode reads they spell."""
    reads = sum(data.count(token) for token in config.prefilter_tokens())
    return len(data) / PARSE_BYTES_PER_S + reads * SECONDS_PER_READ


def _workers(options: RunOptions, costs: Sequence[float]) -> int:
    """How many processes analyse files of these expected costs (seconds,
    :func:`analysis_seconds`): one, unless the work pays for starting each further worker."""
    jobs = options.jobs if options.jobs is not None else (os.cpu_count() or 1)
    if len(costs) < PARALLEL_THRESHOLD:
        return 1
    serial_s = sum(costs)
    start_s = WORKER_START_S + (WORKER_LIBCST_S if options.fix or options.edits else 0.0)
    # n workers take serial_s / n + n * start_s: best at sqrt(serial_s / start_s)
    best = int((serial_s / start_s) ** 0.5)
    return max(1, min(jobs, len(costs) // 2, best))


def _shares(sizes: Sequence[float], workers: int) -> list[range]:
    """The files split into ``workers`` runs of consecutive files (discovery order) of
    about equal expected cost (``sizes``). A package's files go to one worker, which
    parses the modules they call once for all of them; dealt out in small chunks, each
    worker parsed nearly all of them (TransformerEngine, two workers: 0.3 s more CPU than
    one process, and no faster)."""
    prefix = list(itertools.accumulate(sizes, initial=0))
    bounds = [0]
    for k in range(1, workers):
        target = prefix[-1] * k / workers
        at = bisect.bisect_left(prefix, target)  # the nearest boundary on either side
        if at > 0 and (at == len(prefix) or target - prefix[at - 1] <= prefix[at] - target):
            at -= 1
        if bounds[-1] < at < len(sizes):
            bounds.append(at)
    bounds.append(len(sizes))
    return [range(a, b) for a, b in itertools.pairwise(bounds)]


def _analyse_share(jobs: list[Job]) -> list[FileResult]:
    """A worker's share of the files, analysed in order."""
    return [_analyse(job) for job in jobs]


def _discovered(paths: Sequence[str], config: Config, skipped: Callable[[str, str], None] | None) -> list[Discovered]:
    """The files under ``paths``; ``skipped`` hears of those discovery left out."""
    found = []
    for item in discover(paths, config.exclude):
        if item.skipped is None:
            found.append(item)
        elif skipped is not None:
            skipped(item.path, item.skipped)
    return found


def _analysed(jobs: list[tuple], options: RunOptions) -> tuple[Iterator[FileResult], _Workers | None]:
    """The results of ``jobs``, in their order: analysed in this process, or in shares
    by this process and forked children (:mod:`gradgate.forked`), or, where this process
    cannot fork safely, by a pool of workers; the children or pool die with this process
    (what is returned with the results is to be shut down)."""
    costs = [analysis_seconds(job[1], job[2]) for job in jobs]
    workers = _workers(options, costs)
    if workers == 1:
        return map(_analyse, jobs), None
    shares = _shares(costs, workers)
    from .forked import ForkedShares, can_fork

    if can_fork():
        from . import engine  # noqa: F401  # imported once, before the fork: the children have it

        forked = ForkedShares(_analyse, jobs, shares)
        return forked.results(), forked
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    from .workers import die_with_parent

    pool = ProcessPoolExecutor(
        workers,
        mp_context=multiprocessing.get_context(POOL_START_METHOD),
        initializer=die_with_parent,
        initargs=(os.getpid(),),
    )
    submitted = [pool.submit(_analyse_share, jobs[r.start : r.stop]) for r in shares]
    return (result for share in submitted for result in share.result()), pool


#: how the fallback pool starts its workers: this process cannot fork safely (another
#: thread may hold a lock the child would inherit held), so they start afresh
POOL_START_METHOD = "spawn"


class _Workers(Protocol):
    def shutdown(self, *, cancel_futures: bool = ...) -> None: ...


def _ignoring_itself(path: str, source: SourceFile, cache: ResultCache | None, now_ns: int) -> FileResult | None:
    """The result of a file that ignores itself (``# gradgate: ignore-file``), cached by
    its status (a scan decides it again, no digest needed); None for any other file."""
    if not file_ignored_bytes(source.data):
        return None
    ignored = FileResult(path, stage="ignored")
    if cache is not None:
        cache.put(os.path.abspath(path), None, source.info, now_ns, ignored)
    return ignored


@record
class _Held:
    """What the files the pre-filter dropped are analysed and cached with, after the
    run's first pass: the run's configuration, options and roots, its cache (None: no
    cache) and the time its entries are stamped with."""

    config: Config
    options: RunOptions
    roots: tuple[str, ...]
    cache: ResultCache | None
    now_ns: int

    def analyse(self, path: str, data: bytes, also: frozenset[bytes] = frozenset()) -> FileResult:
        return _analyse(_job(path, data, self.config, self.options, self.roots, also))


def _second_pass(
    held: dict[int, FileResult],
    results: list[FileResult | None],
    discovered: list[Discovered],
    context: _Held,
    named: frozenset[int] = frozenset(),
) -> Iterator[tuple[int, FileResult]]:
    """The results of the files the pre-filter dropped: each analysed after all, in
    this process, if it spells the name of a function another file returns grad mode
    from (``grad_on()``), until no new such name turns up; then those of them ``named``
    on the command line (:func:`_outside_pass`); else its held result."""
    names: set[str] = set()
    for result in results:
        if result is not None:
            names.update(result.exports)
    asked: set[str] = set()
    while names - asked and held:
        asked |= names
        also = frozenset(name.encode() for name in names)
        for index in sorted(held):
            item = discovered[index]
            try:
                source = read_source(item.path)
            except SourceError:
                continue
            if not may_hold_findings(source.data, context.config, also):
                continue
            del held[index]
            result = _analyse_held(item.path, source, also, context)
            names.update(result.exports)
            yield index, result
    yield from _outside_pass(held, discovered, context, named)
    yield from held.items()


def _analyse_held(path: str, source: SourceFile, also: frozenset[bytes], context: _Held) -> FileResult:
    """The result of a held file that spells a name in ``also`` (functions returning
    grad mode): ignored if it ignores itself, else analysed with those names; cached."""
    ignored = _ignoring_itself(path, source, context.cache, context.now_ns)
    if ignored is not None:
        return ignored
    result = context.analyse(path, source.data, also)
    if context.cache is not None:
        from .cache import content_key

        context.cache.put(os.path.abspath(path), content_key(source.data), source.info, context.now_ns, result)
    return result


def _outside_pass(
    held: dict[int, FileResult],
    discovered: list[Discovered],
    context: _Held,
    named: frozenset[int],
) -> Iterator[tuple[int, FileResult]]:
    """The held files named on the command line (as pre-commit and editors name them),
    against the modules outside the run they import: a file analysed after all if it
    spells a function such a module returns grad mode from; else held, its result
    resting on those modules (a change to one of them reads it again). A file found in
    a folder is not asked: the modules it imports are mostly in the run, and parsing
    every dropped file for its imports would cost a folder's run more than its analysis.
    A held result that rests on modules already was decided with them (the cache
    checked them unchanged)."""
    inside = set(context.roots)
    whole: dict[str, bool] = {}
    asked = [
        i
        for i in sorted(held)
        if i in named and not held[i].dependencies and not _package_in_run(discovered[i].path, inside, whole)
    ]
    if not asked:
        return
    project = _project(context.config, context.roots)
    exports: dict[str, frozenset[str]] = {}
    for index in asked:
        item = discovered[index]
        try:
            source = read_source(item.path)
        except SourceError:
            continue
        modules = _imported_outside(item.path, source.data, project, inside)
        names: set[str] = set()
        for module in modules:
            if module not in exports:
                exports[module] = _exports_of(module, context, project, inside)
            names |= exports[module]
        also = frozenset(name.encode() for name in names)
        if also and may_hold_findings(source.data, context.config, also):
            del held[index]
            yield index, _analyse_held(item.path, source, also, context)
        elif modules:
            held[index] = FileResult(item.path, stage="prefilter", dependencies=modules)
            if context.cache is not None:
                context.cache.put(os.path.abspath(item.path), None, source.info, context.now_ns, held[index])


def _package_in_run(path: str, inside: set[str], seen: dict[str, bool]) -> bool:
    """Is every module of the top-level package holding ``path`` (outside packages: of
    its folder) in the run? Then nothing it imports from its package is outside it
    (``pre-commit run --all-files`` names every file: none of them is parsed for its
    imports). ``seen`` keeps the answer per folder."""
    from .model.project import module_name

    directory = os.path.dirname(os.path.abspath(path))
    found = seen.get(directory)  # (files of one folder share their package)
    if found is not None:
        return found
    name, package, root = module_name(path)
    top = name.split(".")[0] if package else ""
    folder = os.path.join(root, top) if top else directory
    found = seen.get(folder)
    if found is None:
        if top:
            modules = (
                os.path.join(parent, f) for parent, _, files in os.walk(folder) for f in files if f.endswith(".py")
            )
        else:
            modules = (os.path.join(folder, f) for f in os.listdir(folder) if f.endswith(".py"))
        found = seen[folder] = all(os.path.abspath(m) in inside for m in modules)
    seen[directory] = found
    return found


def _imported_outside(path: str, data: bytes, project: Project, inside: set[str]) -> tuple[str, ...]:
    """The files (absolute) of the modules ``path`` imports from that are found under the
    project's roots and are not among ``inside`` (the run's files)."""
    import ast

    from .model.index import import_aliases
    from .model.project import module_name

    try:
        tree = ast.parse(data)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return ()
    statements: list[ast.stmt] = [n for n in ast.walk(tree) if isinstance(n, ast.Import | ast.ImportFrom)]
    found: set[str] = set()
    for target in set(import_aliases(statements, module_name(path)[1]).values()):
        for name in (target, target.rpartition(".")[0]):
            module = project.find_module(name) if name else None
            if module is not None:
                if os.path.abspath(module) not in inside:
                    found.add(os.path.abspath(module))
                break
    return tuple(sorted(found))


#: modules followed from a named file for what they return grad mode from, deep
MAX_RELAY_MODULES = 3


def _exports_of(
    path: str,
    context: _Held,
    project: Project | None = None,
    inside: set[str] | None = None,
    memo: dict[str, frozenset[str]] | None = None,
    depth: int = 0,
) -> frozenset[str]:
    """The names of the functions the module ``path`` returns grad mode from (its
    analysis, where its bytes may return grad mode at all: a source's token, or the name
    of a function a module it imports returns it from, followed ``MAX_RELAY_MODULES``
    deep, as ``return grad_on()`` relays ``grad_on``)."""
    from .model.project import may_return_grad

    memo = {} if memo is None else memo
    if path in memo:
        return memo[path]
    memo[path] = frozenset()  # (an import cycle adds nothing)
    try:
        data = read_source(path).data
    except SourceError:
        return frozenset()
    tokens = context.config.prefilter_tokens()
    also: frozenset[bytes] = frozenset()
    if not may_return_grad(data, tokens) and project is not None and inside is not None and depth < MAX_RELAY_MODULES:
        names: set[str] = set()
        for module in _imported_outside(path, data, project, inside):
            names |= _exports_of(module, context, project, inside, memo, depth + 1)
        also = frozenset(name.encode() for name in names)
    if not may_return_grad(data, (*tokens, *also)):
        return frozenset()
    memo[path] = frozenset(context.analyse(path, data, also).exports)
    return memo[path]


#: a run's options when none are given
DEFAULT_OPTIONS = RunOptions()


def run(
    paths: Sequence[str],
    config: Config,
    options: RunOptions = DEFAULT_OPTIONS,
    progress: Callable[[int, int], None] | None = None,
    skipped: Callable[[str, str], None] | None = None,
) -> Iterator[FileResult]:
    """One result per file found under ``paths``; ``skipped(path, reason)`` hears of the
    paths discovery left out (symbolic links out of the checked tree). The cyclic
    garbage collector is off meanwhile (:func:`_collect_now_and_then`)."""
    with collector_paused():
        yield from _run(paths, config, options, progress, skipped)


def _run(
    paths: Sequence[str],
    config: Config,
    options: RunOptions,
    progress: Callable[[int, int], None] | None,
    skipped: Callable[[str, str], None] | None,
) -> Iterator[FileResult]:
    import time

    # the previous run's modules go now, not when it ended: the command line ends
    # after its one run without freeing them (35 ms on TransformerEngine)
    _PROJECTS.clear()
    discovered = _discovered(paths, config, skipped)
    total = len(discovered)
    roots = tuple(dict.fromkeys(os.path.abspath(item.path) for item in discovered if item.error is None))
    cache = None
    if options.cache_dir is not None and not options.fix and options.prefilter:
        from .cache import ResultCache, content_key

        cache = ResultCache(options.cache_dir, config)
    now_ns = time.time_ns()

    results: list[FileResult | None] = [None] * total
    #: the files that reach analysis: their index, path and bytes
    reaching: list[tuple[int, str, bytes]] = []
    #: files the pre-filter dropped, held back until it is known whether they call a
    #: function of another file that returns grad mode (their results stay unset)
    held: dict[int, FileResult] = {}
    recorded: dict[int, tuple[str, str, os.stat_result | None]] = {}
    #: what the files read store grad mode in (:mod:`.learned`), and the cached results
    #: of files that reached analysis (their bytes are read for it too)
    learned = NOTHING
    sources = config.sources.grad_source_names()
    analysed_hits: list[int] = []
    #: what each file read stores grad mode in, for its cached result
    stored: dict[int, tuple[str, ...]] = {}

    def admit(index: int, item: Discovered, source: SourceFile, spells: bool | None, carriers: tuple[str, ...]) -> None:
        """Decide a file the cache did not: the pre-filter (``spells``: whether the bytes
        hold a source's token, None: not asked yet), an `ignore-file`, or analysis."""
        from .cache import content_key

        abspath = os.path.abspath(item.path)
        data = source.data
        if spells is None:
            spells = not options.prefilter or may_hold_findings(data, config)
        elif not spells and carriers:
            spells = may_hold_findings(data, config)  # a learned carrier's name
        if not spells:
            if abspath in options.named:  # named (pre-commit, a user): parsed all the same
                reason = syntax_error(data)
                if reason is not None:
                    results[index] = FileResult(item.path, error=reason)
                    return
            held[index] = prefiltered = FileResult(item.path, stage="prefilter", carriers=carriers)
            if cache is not None:  # decided by a scan of the bytes: found again by status only
                cache.put(abspath, None, source.info, now_ns, prefiltered)
            return
        ignored = _ignoring_itself(item.path, source, cache, now_ns)
        if ignored is not None:
            results[index] = ignored
            return
        if cache is not None:
            recorded[index] = (abspath, content_key(data), source.info)
        reaching.append((index, item.path, data))

    fresh: list[tuple[int, Discovered, SourceFile, bool]] = []
    for index, item in enumerate(discovered):
        if item.error is not None:
            results[index] = FileResult(item.path, error=item.error)
            continue
        abspath = os.path.abspath(item.path)
        if cache is not None:
            try:
                info = os.stat(item.path)
            except OSError:
                info = None
            hit = cache.get_unchanged(abspath, info, item.path) if info is not None else None
            if hit is not None and not (hit.stage == "prefilter" and abspath in options.named):
                if hit.stage == "prefilter":  # status unchanged: not read at all
                    held[index] = hit
                else:
                    results[index] = hit
                    analysed_hits.append(index)
                continue
        try:
            source = read_source(item.path)
        except SourceError as exc:
            results[index] = FileResult(item.path, error=str(exc))
            continue
        data = source.data
        spells = not options.prefilter or may_hold_findings(data, config)
        if spells:
            stores = learn(data, sources)
            learned |= stores
            if stores != NOTHING:
                stored[index] = stores.encoded()
        if cache is not None and cache.confirms_content(abspath):
            hit = cache.get(abspath, content_key(data), item.path)
            if hit is not None:  # touched, not changed
                cache.refresh(abspath, source.info, now_ns)
                results[index] = hit
                analysed_hits.append(index)
                continue
        fresh.append((index, item, source, spells))
    for index in analysed_hits:  # what the cached files store (recorded with their results)
        learned |= Learned.decoded(results[index].learned)  # type: ignore[union-attr]
    fields, keys, params = learned.names()
    gated, injected = learned.gated_names(), learned.injected_names()
    config = config.with_learned(fields, keys, params, gated, injected)
    carriers = (
        *fields,
        *(f"[{k}]" for k in keys),
        *(f"{p}=" for p in params),
        *(f"&{g}" for g in gated),
        *(f"@{i}" for i in injected),
    )
    for index, item, source, spells in fresh:
        admit(index, item, source, spells, carriers)
    # results decided while the run had learned other carriers are decided again
    stale = [i for i in analysed_hits if results[i].carriers != carriers]  # type: ignore[union-attr]
    stale += [i for i, result in held.items() if result.carriers != carriers]
    for index in sorted(stale):
        results[index] = None
        held.pop(index, None)
        item = discovered[index]
        try:
            source = read_source(item.path)
        except SourceError as exc:
            results[index] = FileResult(item.path, error=str(exc))
            continue
        admit(index, item, source, None, carriers)
    reaching.sort()

    analysed = frozenset(os.path.abspath(path) for _, path, _ in reaching)
    pending = [(index, _job(path, data, config, options, roots, analysed=analysed)) for index, path, data in reaching]

    done = total - len(pending) - len(held)
    computed, pool = _analysed([job for _, job in pending], options)
    try:
        next_out = 0
        for (index, _), result in zip(pending, computed):
            if carriers or index in stored:
                result = replace(result, carriers=carriers, learned=stored.get(index, ()))
            results[index] = result
            if cache is not None and index in recorded:
                cache.put(*recorded.pop(index), now_ns, result)
            done += 1
            if progress is not None:
                progress(done, total)
            while next_out < total and results[next_out] is not None:
                yield results[next_out]  # type: ignore[misc]
                next_out += 1
        named = frozenset(i for i, item in enumerate(discovered) if os.path.abspath(item.path) in options.named)
        context = _Held(config, options, roots, cache, now_ns)
        for index, result in _second_pass(held, results, discovered, context, named):
            results[index] = result
            done += 1
            if progress is not None:
                progress(done, total)
        while next_out < total:
            yield results[next_out]  # type: ignore[misc]
            next_out += 1
    finally:
        if pool is not None:
            pool.shutdown(cancel_futures=True)
        if cache is not None:
            cache.save()
