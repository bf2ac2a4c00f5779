"""The ``gradgate`` command line. Only this module and the reporters print.

``check``, ``fix``, ``server``, ``rules`` and ``explain`` are parsed with :mod:`argparse`
(2 ms to import, where click took 20-28 ms of a 140 ms check of one file); ``harness``
and ``witness`` are click commands of their own modules, imported and handed the rest of
the command line only when named. :func:`run` runs a command line in-process and
returns its exit code; :func:`main`, the ``gradgate`` entry point, runs ``sys.argv`` and
ends the process.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NoReturn

from . import __version__
from .config import ConfigError
from .escape import display
from .records import record

if TYPE_CHECKING:  # imported where used: `gradgate --version` and `rules` start without them
    from .runner import RunOptions
    from .settings import Resolver
    from .targets import Target

EXIT_CLEAN = 0
EXIT_FINDINGS = 1
EXIT_ERROR = 2
#: `fix`: a file to be fixed is read-only (and nothing else went wrong); it is left as it is
EXIT_READ_ONLY = 3
#: the command was interrupted (Ctrl-C): 128 + SIGINT, as shells report it
EXIT_INTERRUPTED = 130

FORMATS = ["text", "json", "sarif", "github", "junit", "gitlab"]


class UsageError(Exception):
    """A command line gradgate cannot run: printed with the command's usage, exit 2."""


def _codes(value: str | None) -> tuple[str, ...]:
    return tuple(c.strip().upper() for c in value.split(",") if c.strip()) if value else ()


@record(frozen=False)
class Invocation:
    """What the shared options of ``check`` and ``fix`` resolve to."""

    paths: tuple[str, ...]
    #: the files to check, each with its settings (empty when reading standard input)
    targets: list[Target]
    resolver: Resolver
    options: RunOptions
    progress: bool
    #: the path standard input stands for, when a path is ``-``
    stdin_filename: str | None = None


def _per_file_option(values: Sequence[str]) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """``--per-file-ignores GLOB:CODES`` (repeatable), as ruff spells it."""
    out = []
    for value in values:
        glob, colon, codes = value.rpartition(":")
        if not colon or not glob or not _codes(codes):
            raise UsageError(f"--per-file-ignores {value!r}: expected GLOB:CODES (`tests/*:GG001,GG003`)")
        out.append((glob, _codes(codes)))
    return tuple(out)


def _override(
    select, ignore, exclude, report_unused_ignores, extend_select=None, extend_ignore=None, per_file_ignores=()
):
    """The command line's changes to a file's configuration (None: none)."""
    changes_select = _codes(select) if select else None
    extra_ignore = (*_codes(ignore), *_codes(extend_ignore))
    extra_select = _codes(extend_select)
    per_file = _per_file_option(per_file_ignores)
    if not (changes_select or extra_ignore or extra_select or per_file or exclude or report_unused_ignores):
        return None
    from .config import UNUSED_SUPPRESSION_CODE

    def apply(config):
        changes: dict[str, Any] = {}
        if changes_select:
            changes["select"] = changes_select
        if extra_ignore:
            changes["ignore"] = (*config.ignore, *extra_ignore)
        if exclude:
            changes["exclude"] = (*config.exclude, *exclude)
        if report_unused_ignores or extra_select:
            unused = (UNUSED_SUPPRESSION_CODE,) if report_unused_ignores else ()
            changes["extend_select"] = (*config.extend_select, *extra_select, *unused)
        if per_file:
            changes["per_file_ignores"] = (*config.per_file_ignores, *per_file)
        return config.with_changes(**changes)

    return apply


def _invocation(
    paths,
    config_file,
    select,
    ignore,
    exclude,
    no_cache,
    cache_dir,
    jobs,
    no_prefilter,
    progress,
    fix,
    report_unused_ignores=False,
    stdin_filename=None,
    force_exclude=True,
    respect_gitignore=True,
    unsafe_fixes=False,
    edits=False,
    extend_select=None,
    extend_ignore=None,
    per_file_ignores=(),
    known=None,
) -> Invocation:
    from .runner import RunOptions
    from .settings import Resolver
    from .targets import collect

    paths = tuple(paths) or (".",)
    if "-" in paths and len(paths) > 1:
        raise UsageError("`-` (standard input) cannot be combined with other paths")
    if stdin_filename is not None and "-" not in paths and paths != (".",):
        raise UsageError("--stdin-filename is for `-` (standard input)")
    if stdin_filename is not None:
        from .discovery import NOTEBOOK_REFUSED, NOTEBOOK_SUFFIX

        if stdin_filename.endswith(NOTEBOOK_SUFFIX):
            raise UsageError(f"--stdin-filename {display(stdin_filename)}: {NOTEBOOK_REFUSED}")
        paths = ("-",)
    resolver = Resolver(
        config_file,
        _override(select, ignore, exclude, report_unused_ignores, extend_select, extend_ignore, per_file_ignores),
    )
    try:
        if paths == ("-",):
            # validate the configuration now: usage errors before reading stdin
            resolver.for_path(stdin_filename or "stdin.py")
            targets = []
        else:
            targets = collect(
                paths,
                resolver,
                force_exclude=force_exclude,
                respect_gitignore=respect_gitignore,
                exclude=tuple(exclude),
                skipped=_print_skipped,
            )
    except ConfigError as exc:
        raise UsageError(str(exc)) from None
    if cache_dir is not None and not no_cache and os.path.exists(cache_dir) and not os.path.isdir(cache_dir):
        raise UsageError(f"--cache-dir {display(cache_dir)}: not a directory")
    if progress is None:
        progress = sys.stderr.isatty() and not os.environ.get("CI")
    options = RunOptions(
        fix=fix,
        prefilter=not no_prefilter,
        cache_dir=None if no_cache else (cache_dir or _default_cache_dir()),
        jobs=jobs,
        unsafe_fixes=unsafe_fixes,
        edits=edits,
        known=known,
    )
    return Invocation(
        paths, targets, resolver, options, progress, stdin_filename=(stdin_filename or "-") if paths == ("-",) else None
    )


def _default_cache_dir() -> str:
    from .cache import default_cache_dir  # (a run without a cache imports no hashing)

    return default_cache_dir()


class _Progress:
    """A one-line progress bar on stderr, for terminals only."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.shown = False

    def __call__(self, done: int, total: int) -> None:
        if not self.enabled or total < 50:
            return
        width = 30
        filled = width * done // max(total, 1)
        sys.stderr.write(f"\r[{'#' * filled}{' ' * (width - filled)}] {done}/{total} files")
        sys.stderr.flush()
        self.shown = True

    def close(self) -> None:
        if self.shown:
            sys.stderr.write("\r" + " " * 60 + "\r")
            sys.stderr.flush()


def _results(invocation: Invocation):
    """One FileResult per target, in discovery order (files grouped by settings are run
    group by group; each group with its own configuration and root)."""
    from .records import replace
    from .results import FileResult
    from .runner import run
    from .targets import groups

    if invocation.stdin_filename is not None:
        yield _stdin_result(invocation)
        return
    targets = invocation.targets
    total = len(targets)
    progress = _Progress(invocation.progress)
    by_path: dict[str, FileResult] = {}
    done_before = 0

    def step(done: int, _total: int) -> None:
        progress(done_before + done, total)

    try:
        next_out = 0
        for settings, members in groups(targets):
            named = frozenset(os.path.abspath(t.path) for t in members if t.named)
            options = replace(invocation.options, root=settings.root, named=named)
            for result in run([t.path for t in members], settings.config, options, step, skipped=_print_skipped):
                by_path[result.path] = result
            done_before += len(members)
            while next_out < total and (targets[next_out].error is not None or targets[next_out].path in by_path):
                target = targets[next_out]
                yield by_path.pop(target.path) if target.error is None else FileResult(target.path, error=target.error)
                next_out += 1
        while next_out < total:
            target = targets[next_out]
            yield by_path.pop(target.path) if target.error is None else FileResult(target.path, error=target.error)
            next_out += 1
    finally:
        progress.close()


def _stdin_result(invocation: Invocation):
    """The result of standard input checked as ``--stdin-filename``."""
    from .document import excluded, lint_document
    from .results import FileResult
    from .targets import display_path

    data = sys.stdin.buffer.read()
    name = invocation.stdin_filename or "-"
    shown = display_path(name) if name != "-" else "-"
    settings = invocation.resolver.for_path(name if name != "-" else "stdin.py")
    if name != "-" and excluded(name, settings):
        return FileResult(shown, source=data, stage="excluded")
    options = invocation.options
    return lint_document(
        shown,
        data,
        settings,
        fix=options.fix,
        unsafe_fixes=options.unsafe_fixes,
        edits=options.edits and not options.fix,
        known=options.known,
    )


def _echo(text: str | bytes, err: bool = False, nl: bool = True) -> None:
    """Write ``text`` (and a newline) to standard output, or to standard error; bytes
    (a diff, in the file's own encoding) go to the stream's buffer as they are."""
    stream = sys.stderr if err else sys.stdout
    if isinstance(text, bytes):
        stream.flush()
        stream.buffer.write(text + b"\n" if nl else text)
        stream.buffer.flush()
        return
    text = f"{text}\n" if nl else text
    try:
        stream.write(text)
    except UnicodeEncodeError:  # a stream that cannot hold the text (PYTHONIOENCODING=ascii)
        stream.flush()
        stream.buffer.write(text.encode(stream.encoding or "utf-8", "backslashreplace"))
    stream.flush()


def _print_skipped(path: str, reason: str) -> None:
    _echo(f"warning: {display(path)}: {reason}: not checked", err=True)


def _print_errors(results) -> list:
    """Print each file's error, and what the run gave up on (its notices), to stderr."""
    errors = [r for r in results if r.error is not None]
    for result in errors:
        _echo(f"error: {display(result.path)}: {display(result.error)}", err=True)
    for notice in (n for r in results for n in r.notices):
        where = f"{display(notice.path)}:{notice.line}" if notice.line else display(notice.path)
        _echo(f"warning: {where}: {display(notice.message)}", err=True)
    return errors


def _color(output_file: str | None) -> bool:
    """Colour for the text format: ``NO_COLOR`` turns it off, ``FORCE_COLOR`` on,
    otherwise on when standard output is a terminal (never for ``-o FILE``)."""
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    return output_file is None and sys.stdout.isatty()


@record(frozen=False)
class Output:
    """How findings are shown: the format and the text format's knobs."""

    output_format: str = "text"
    show_source: bool = False
    show_fixes: bool = False
    statistics: bool = False
    quiet: bool = False
    output_file: str | None = None
    unsafe_fixes: bool = False

    def render(self, findings, errors, summary: bool = True, notices=(), **sarif) -> str:
        from . import reporters

        if self.output_format == "json":
            return reporters.render_json(findings, notices)
        if self.output_format == "sarif":
            return reporters.render_sarif(findings, errors, notices=notices, **sarif)
        if self.output_format == "github":
            return reporters.render_github(findings, errors)
        if self.output_format == "junit":
            return reporters.render_junit(findings, errors)
        if self.output_format == "gitlab":
            return reporters.render_gitlab(findings, errors)
        color = _color(self.output_file)
        if self.statistics:
            text = reporters.render_statistics(findings, self.unsafe_fixes)
        else:
            text = reporters.render_text(
                findings,
                show_source=self.show_source,
                color=color,
                show_fixes=self.show_fixes,
                unsafe_fixes=self.unsafe_fixes,
            )
        if summary and not self.quiet:
            text += reporters.summary(findings, len(errors), self.unsafe_fixes, len(notices)) + "\n"
        return text

    def write(self, text: str, err: bool = False) -> None:
        if self.output_file is not None and not err:
            try:
                with open(self.output_file, "w", encoding="utf-8", newline="") as handle:
                    handle.write(text)
            except OSError as exc:
                raise UsageError(f"cannot write {self.output_file}: {exc.strerror}") from None
            return
        _echo(text, nl=False, err=err)


def _positive(text: str) -> int:
    """An ``int`` of at least 1 (``--jobs``)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a valid integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not in the range x>=1")
    return value


class _Formatter(argparse.RawDescriptionHelpFormatter):
    """argparse's formatter, told the terminal's width: argparse makes one for every
    option it adds and asks ``shutil`` each time (importing it: 2.4 ms of a warm check)."""

    def __init__(self, prog: str) -> None:
        super().__init__(prog, width=_help_width())


def _help_width() -> int:
    """The width help is wrapped to: ``$COLUMNS``, else the terminal's, less 2 (argparse's)."""
    try:
        columns = int(os.environ.get("COLUMNS", ""))
    except ValueError:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno() if sys.__stdout__ else 1).columns
        except (OSError, ValueError):
            columns = 80
    return max(columns - 2, 20)


class _Parser(argparse.ArgumentParser):
    """A command's parser: errors raise :class:`UsageError` (printed by :func:`run`),
    ``-h`` is read after the whole command line is (an unknown option is refused, with
    or without it), and long options are never abbreviated."""

    def __init__(self, name: str, description: str, usage: str = "") -> None:
        super().__init__(
            prog=f"gradgate {name}",
            usage=f"%(prog)s {usage}".rstrip(),
            description=description,
            add_help=False,
            allow_abbrev=False,
            formatter_class=_Formatter,
        )
        self.add_argument("-h", "--help", action="store_true", help="Show this message and exit.")

    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def _shared(parser: _Parser) -> None:
    """Options shared by ``check`` and ``fix``."""
    add = parser.add_argument
    add("paths", nargs="*", metavar="PATHS", help=argparse.SUPPRESS)
    add("--format", dest="output_format", choices=FORMATS, default="text", help="Output format (default: text).")
    add(
        "--config",
        dest="config_file",
        metavar="FILE",
        help="A gradgate.toml or pyproject.toml for every file (default: the nearest to each file).",
    )
    add("--select", metavar="CODES", help="Comma-separated rule codes (or prefixes) to run.")
    add("--extend-select", metavar="CODES", help="Rule codes (or prefixes) to run besides the selection.")
    add("--ignore", metavar="CODES", help="Comma-separated rule codes (or prefixes) to skip.")
    add("--extend-ignore", metavar="CODES", help="Rule codes (or prefixes) to skip besides `ignore` (as --ignore).")
    add(
        "--per-file-ignores",
        action="append",
        default=[],
        metavar="GLOB:CODES",
        help="Rules to skip in files matching GLOB (repeatable; GLOB as in the configuration's).",
    )
    add("--exclude", action="append", default=[], metavar="GLOB", help="Glob of paths to skip (repeatable).")
    add(
        "--force-exclude",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="Apply `exclude` to files named on the command line too (as pre-commit names them).",
    )
    add(
        "--respect-gitignore",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="Skip files ignored by git (.gitignore, .git/info/exclude).",
    )
    add(
        "--stdin-filename",
        metavar="PATH",
        help="The path standard input (`-`) stands for: its config and ignores apply.",
    )
    add(
        "--unsafe-fixes",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="Also apply (and count as fixable) fixes that may change behaviour beyond the bug.",
    )
    add("--show-fixes", action="store_true", help="Show each finding's fix (check) or the fixes applied (fix).")
    add("--exit-zero", action="store_true", help="Exit 0 even when findings are left (2 still means errors).")
    add("--output-file", "-o", metavar="FILE", help="Write the report to this file.")
    add("--quiet", "-q", action="store_true", help="Print the findings and errors only: no summary or counts.")
    add("--no-cache", action="store_true", help="Neither read nor write the result cache.")
    add(
        "--cache-dir",
        metavar="DIR",
        help="Cache folder (default: $GRADGATE_CACHE_DIR, else the user's cache directory, ~/.cache/gradgate).",
    )
    add("--jobs", "-j", type=_positive, metavar="N", help="Processes that analyse files (default: CPUs).")
    # analyse every file fully, past the pre-filter (slow; for verification)
    add("--no-prefilter", action="store_true", help=argparse.SUPPRESS)
    add(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="Progress bar on stderr (default: when stderr is a terminal, not in CI).",
    )


def _check_parser() -> _Parser:
    parser = _Parser("check", CHECK_HELP, "[OPTIONS] [PATHS]...")
    _shared(parser)
    add = parser.add_argument
    add("--show-source", action="store_true", help="Show the source line and a fix hint.")
    add("--statistics", action="store_true", help="Count findings per rule instead of listing them.")
    add(
        "--baseline",
        dest="baseline_file",
        metavar="FILE",
        help="Report only findings not recorded in this baseline file.",
    )
    add(
        "--write-baseline",
        dest="write_baseline_file",
        metavar="FILE",
        help="Record the current findings in this file and exit 0.",
    )
    add(
        "--add-noqa",
        action="store_true",
        help="Add a `# gradgate: ignore[CODE]` comment on each finding's line; exit 0.",
    )
    add(
        "--report-unused-ignores",
        action="store_true",
        help="Also report `# gradgate: ignore` comments that suppress nothing (GG100).",
    )
    add("--show-settings", action="store_true", help="Print the settings of the first file to check, and exit.")
    add("--show-files", action="store_true", help="Print the files that would be checked, and exit.")
    return parser


def _fix_parser() -> _Parser:
    parser = _Parser("fix", FIX_HELP, "[OPTIONS] [PATHS]...")
    _shared(parser)
    add = parser.add_argument
    add("--diff", action="store_true", help="Print a unified diff of the fixes; write nothing (exit 1 if any).")
    add("--exit-non-zero-on-fix", action="store_true", help="Exit 1 when a file was fixed, even if nothing is left.")
    add(
        "--baseline",
        dest="baseline_file",
        metavar="FILE",
        help="Leave the findings this baseline records unfixed and unreported.",
    )
    return parser


CHECK_HELP = "Report grad-mode gated forward decisions under PATHS (default: .; `-`: standard input)."

FIX_HELP = """Fix what can be fixed under PATHS (default: .); report what is left.

A file is rewritten only when its fixed text re-parses, atomically, keeping its
encoding, line endings and permissions, and never if it changed since it was read.
With `-` the fixed standard input goes to standard output, the findings left to
standard error."""


def check(
    paths,
    output_format,
    config_file,
    select,
    ignore,
    exclude,
    force_exclude,
    respect_gitignore,
    stdin_filename,
    unsafe_fixes,
    show_fixes,
    exit_zero,
    output_file,
    quiet,
    no_cache,
    cache_dir,
    jobs,
    no_prefilter,
    progress,
    show_source,
    statistics,
    baseline_file,
    write_baseline_file,
    add_noqa,
    report_unused_ignores,
    extend_select=None,
    extend_ignore=None,
    per_file_ignores=(),
    show_settings=False,
    show_files=False,
) -> int:
    """``gradgate check``: :data:`CHECK_HELP`; the exit code."""
    _collector_off()
    from .results import Finding

    edits = output_format in ("json", "sarif") or show_fixes  # for the consumers that show or apply them
    invocation = _invocation(
        paths,
        config_file,
        select,
        ignore,
        exclude,
        no_cache,
        cache_dir,
        jobs,
        no_prefilter,
        progress,
        fix=False,
        report_unused_ignores=report_unused_ignores,
        stdin_filename=stdin_filename,
        force_exclude=force_exclude,
        respect_gitignore=respect_gitignore,
        unsafe_fixes=unsafe_fixes,
        edits=edits,
        extend_select=extend_select,
        extend_ignore=extend_ignore,
        per_file_ignores=per_file_ignores,
    )
    if show_files or show_settings:
        return _show(invocation, show_settings)
    out = Output(output_format, show_source, show_fixes, statistics, quiet, output_file, unsafe_fixes)
    results = list(_results(invocation))
    if edits:  # the files analysed have their edits; a cached result or standard input may not
        from .document import file_config, with_edits

        results = [
            with_edits(r, file_config(r.path, invocation.resolver.for_path(r.path))) if r.findings else r
            for r in results
        ]
    errors = _print_errors(results)
    findings = sorted((f for r in results for f in r.findings), key=Finding.sort_key)
    if add_noqa:
        if invocation.stdin_filename is not None:
            raise UsageError("--add-noqa rewrites files: it cannot read standard input")
        _add_noqa(results, quiet)
        return EXIT_ERROR if errors else EXIT_CLEAN
    root = os.getcwd()
    if write_baseline_file or baseline_file:
        from . import baseline
    if write_baseline_file:
        try:
            count = baseline.write(write_baseline_file, findings, root)
        except baseline.BaselineError as exc:
            raise UsageError(str(exc)) from None
        _echo(f"Wrote {count} finding{'s' if count != 1 else ''} to {display(write_baseline_file)}.", err=True)
        return EXIT_ERROR if errors else EXIT_CLEAN
    sarif: dict[str, Any] = {}
    if baseline_file:
        try:
            known = baseline.load(baseline_file)
        except baseline.BaselineError as exc:
            raise UsageError(str(exc)) from None
        total = findings
        findings = baseline.new_findings(findings, known, root)
        new = {id(f) for f in findings}
        sarif = {"baselined": [f for f in total if id(f) not in new], "baseline_file": baseline_file}
        if len(total) != len(findings) and output_format == "text" and not quiet:
            _echo(f"{len(total) - len(findings)} finding(s) in the baseline not shown.", err=True)
    sarif["suppressed"] = sorted((f for r in results for f in r.suppressed), key=lambda f: f.sort_key())
    notices = [n for r in results for n in r.notices]
    out.write(out.render(findings, errors, notices=notices, **(sarif if output_format == "sarif" else {})))
    return EXIT_ERROR if errors else EXIT_FINDINGS if findings and not exit_zero else EXIT_CLEAN


def _show(invocation: Invocation, settings: bool) -> int:
    """``--show-files``: the files a check would read, one a line; ``--show-settings``:
    the settings of the first of them (its configuration file and every value)."""
    from .records import as_dict

    targets = [t for t in invocation.targets if t.error is None]
    if not settings:
        for target in targets:
            _echo(display(target.path))
        return EXIT_CLEAN
    if targets:
        path, found = targets[0].path, targets[0].settings
    else:
        path = invocation.stdin_filename or (invocation.paths[0] if invocation.paths else ".")
        found = invocation.resolver.for_path(path if path != "-" else "stdin.py")
    assert found is not None
    from .document import file_config
    from .targets import display_path

    _echo(f"Resolved settings for: {display(path)}")
    _echo(f"Settings path: {display(display_path(found.source)) if found.source else '(defaults)'}")
    _echo(f"Root: {display(display_path(found.root))}")
    for name, value in as_dict(file_config(path, found)).items():
        _echo(f"{name} = {value!r}")
    return EXIT_CLEAN


def _add_noqa(results, quiet: bool) -> None:
    from .noqa import add_suppressions
    from .source import SourceError, decode_check, write_atomic

    total = files = 0
    for result in results:
        if not result.findings or result.source is None:
            continue
        encoding = decode_check(result.source)
        text, added = add_suppressions(result.source.decode(encoding), result.findings)
        if not added:
            continue
        try:
            write_atomic(result.path, result.source, text.encode(encoding))
        except SourceError as exc:
            _echo(f"error: {result.path}: {exc}", err=True)
            continue
        total += added
        files += 1
    if not quiet:
        _echo(
            f"Added {total} suppression{'s' if total != 1 else ''} in {files} file{'s' if files != 1 else ''}.",
            err=True,
        )


def fix(
    paths,
    output_format,
    config_file,
    select,
    ignore,
    exclude,
    force_exclude,
    respect_gitignore,
    stdin_filename,
    unsafe_fixes,
    show_fixes,
    exit_zero,
    output_file,
    quiet,
    no_cache,
    cache_dir,
    jobs,
    no_prefilter,
    progress,
    diff,
    exit_non_zero_on_fix,
    extend_select=None,
    extend_ignore=None,
    per_file_ignores=(),
    baseline_file=None,
) -> int:
    """``gradgate fix``: :data:`FIX_HELP`; the exit code."""
    _collector_off()
    from . import reporters
    from .records import replace
    from .results import FileResult, Finding
    from .source import ReadOnly, SourceError, write_atomic

    known = None
    if baseline_file:
        from . import baseline

        try:
            known = baseline.known_of(baseline_file, os.getcwd())
        except baseline.BaselineError as exc:
            raise UsageError(str(exc)) from None

    invocation = _invocation(
        paths,
        config_file,
        select,
        ignore,
        exclude,
        no_cache,
        cache_dir,
        jobs,
        no_prefilter,
        progress,
        fix=True,
        stdin_filename=stdin_filename,
        force_exclude=force_exclude,
        respect_gitignore=respect_gitignore,
        unsafe_fixes=unsafe_fixes,
        extend_select=extend_select,
        extend_ignore=extend_ignore,
        per_file_ignores=per_file_ignores,
        known=known,
    )
    out = Output(output_format, False, show_fixes, False, quiet, output_file, unsafe_fixes)
    stdin = invocation.stdin_filename is not None
    results: list[FileResult] = []
    changed: list[FileResult] = []
    read_only: set[str] = set()
    for result in _results(invocation):
        if stdin:
            if diff:
                if result.changed:
                    _echo(reporters.unified_diff(result), nl=False)
            elif result.source is not None:
                sys.stdout.buffer.write(result.fixed if result.changed else result.source)
                sys.stdout.buffer.flush()
            if result.changed:
                changed.append(result)
            results.append(result)
            continue
        done = False
        if result.changed:
            if diff:
                _echo(reporters.unified_diff(result), nl=False)
            else:
                try:
                    write_atomic(result.path, result.source, result.fixed)
                except SourceError as exc:
                    # nothing was written: every finding of the file is still there
                    unfixed = (*result.fixed_findings, *result.findings)
                    result = FileResult(result.path, tuple(sorted(unfixed, key=Finding.sort_key)), error=str(exc))
                    if isinstance(exc, ReadOnly):
                        read_only.add(result.path)
            done = result.error is None
        if result.source is not None or result.fixed is not None:
            # written (or shown): what follows needs the findings, not the bytes; a fix of
            # many files then holds one file's bytes at a time
            result = replace(result, source=None, fixed=None)
        if done:
            changed.append(result)
        results.append(result)
    errors = _print_errors(results)
    remaining = sorted((f for r in results for f in r.findings if known is None or not known(f)), key=Finding.sort_key)
    verb = "Would fix" if diff else "Fixed"
    total = sum(len(r.fixed_findings) for r in changed)
    if not quiet:
        for result in changed:
            n = len(result.fixed_findings)
            _echo(f"{verb} {n} finding{'s' if n != 1 else ''} in {display(result.path)}", err=True)
        if show_fixes and changed:
            _echo(reporters.render_fixed(changed), nl=False, err=True)
        _echo(
            f"{verb} {total} finding{'s' if total != 1 else ''} in {len(changed)} "
            f"file{'s' if len(changed) != 1 else ''}; {len(remaining)} left.",
            err=True,
        )
    if output_format != "text":
        out.write(out.render(remaining, errors, notices=[n for r in results for n in r.notices]))
    elif remaining:
        # with --diff or `-`, stdout is the patch or the code: the findings left go to stderr
        text = reporters.render_text(remaining, color=_color(output_file), unsafe_fixes=unsafe_fixes)
        if output_file is not None:
            out.write(text)
        else:
            _echo(text, nl=False, err=diff or stdin)
    if errors:
        return EXIT_READ_ONLY if all(r.path in read_only for r in errors) else EXIT_ERROR
    pending = remaining and not exit_zero
    fixed_something = total > 0 and (diff or exit_non_zero_on_fix)
    return EXIT_FINDINGS if pending or fixed_something else EXIT_CLEAN


def server() -> int:
    """Run the language server over stdio (needs the `lsp` extra: pip install 'gradgate[lsp]')."""
    try:
        from .server import main as serve
    except ImportError as exc:
        raise UsageError(
            f"the language server needs pygls and lsprotocol ({exc}): install gradgate with the `lsp` extra"
        ) from None
    # a long-lived process: the collector's first generation is made less eager
    gc.set_threshold(GC_THRESHOLD, *gc.get_threshold()[1:])
    return serve()


def list_rules() -> int:
    """List the rules."""
    from .rule import all_rules

    for rule in all_rules():
        _echo(f"{rule.CODE}  {rule.NAME}  {rule.MESSAGE}")
    return EXIT_CLEAN


def explain(code: str | None) -> int:
    """Print a rule's documentation."""
    from .rule import rule_by_code

    if code is None:
        raise UsageError("Missing argument 'CODE'.")
    rule = rule_by_code().get(code.upper())
    if rule is None:
        raise UsageError(f"unknown rule {code!r}; `gradgate rules` lists them")
    _echo(f"# {rule.CODE} {rule.NAME}\n\n{rule.documentation()}")
    return EXIT_CLEAN


def _server_parser() -> _Parser:
    return _Parser("server", server.__doc__ or "", "[OPTIONS]")


def _rules_parser() -> _Parser:
    return _Parser("rules", list_rules.__doc__ or "", "[OPTIONS]")


def _explain_parser() -> _Parser:
    parser = _Parser("explain", explain.__doc__ or "", "[OPTIONS] CODE")
    parser.add_argument("code", nargs="?", metavar="CODE", help="A rule's code (GG001).")
    return parser


#: each command: its parser's maker and the function its arguments are given to
COMMANDS: dict[str, tuple[Callable[[], _Parser], Callable[..., int]]] = {
    "check": (_check_parser, check),
    "explain": (_explain_parser, explain),
    "fix": (_fix_parser, fix),
    "rules": (_rules_parser, list_rules),
    "server": (_server_parser, server),
}

#: the click commands of optional parts, by name: their module, imported when named
CLICK_COMMANDS = {"harness": "gradgate.harness.cli", "witness": "gradgate.witness.cli"}

DESCRIPTION = "Find and fix forward-path decisions gated on PyTorch grad mode."


def _click_command(name: str) -> Any:
    """The click command ``name`` of :data:`CLICK_COMMANDS` (None: its part is not installed)."""
    import importlib

    try:
        module = importlib.import_module(CLICK_COMMANDS[name])
    except ImportError:  # the harness package is optional
        return None
    return getattr(module, name)


def _top_help() -> str:
    rows = [(name, (make_parser().description or "").splitlines()[0]) for name, (make_parser, _) in COMMANDS.items()]
    for name in CLICK_COMMANDS:
        command = _click_command(name)
        if command is not None:
            rows.append((name, command.get_short_help_str(limit=80)))
    width = max(len(name) for name, _ in rows)
    commands = "\n".join(f"  {name.ljust(width)}  {text}" for name, text in sorted(rows))
    return (
        f"Usage: gradgate [OPTIONS] COMMAND [ARGS]...\n\n  {DESCRIPTION}\n\n"
        "Options:\n  --version   Show the version and exit.\n  -h, --help  Show this message and exit.\n\n"
        f"Commands:\n{commands}\n"
    )


def _parse(parser: _Parser, args: list[str]) -> dict[str, Any]:
    """The command's arguments: options anywhere among the positional ones, and every
    argument after a ``--`` positional (a path that starts with ``-``), as click took them."""
    after: list[str] = []
    if "--" in args:
        at = args.index("--")
        args, after = args[:at], args[at + 1 :]
    parsed = vars(parser.parse_intermixed_args(args))
    if after:
        if "paths" in parsed:
            parsed["paths"] = [*parsed["paths"], *after]
        elif parsed.get("code") is None and len(after) == 1 and "code" in parsed:
            parsed["code"] = after[0]
        else:
            raise UsageError(f"unrecognized arguments: {' '.join(after)}")
    return parsed


def run(argv: Sequence[str]) -> int:
    """Run the command line ``argv`` (without the program's name) in this process; its
    exit code. Usage errors are printed (with the command's usage) and give 2."""
    args = list(argv)
    usage, hint = "gradgate [OPTIONS] COMMAND [ARGS]...", "gradgate -h"
    try:
        if not args or args[0] in ("-h", "--help"):
            _echo(_top_help(), nl=False, err=not args)
            return EXIT_CLEAN if args else EXIT_ERROR
        if args[0] == "--version":
            _echo(f"gradgate, version {__version__}")
            return EXIT_CLEAN
        name, rest = args[0], args[1:]
        if name.startswith("-"):
            raise UsageError(f"No such option: {name}")
        if name in CLICK_COMMANDS and (command := _click_command(name)) is not None:
            try:
                command.main(args=rest, prog_name=f"gradgate {name}", help_option_names=["-h", "--help"])
            except SystemExit as end:
                return _status(end.code)
            return EXIT_CLEAN
        if name not in COMMANDS:
            raise UsageError(f"No such command '{name}'.")
        make_parser, function = COMMANDS[name]
        parser = make_parser()
        usage, hint = parser.format_usage().removeprefix("usage: ").strip(), f"gradgate {name} -h"
        parsed = _parse(parser, rest)
        if parsed.pop("help"):
            _echo(parser.format_help().replace("usage: ", "Usage: ", 1), nl=False)
            return EXIT_CLEAN
        return function(**parsed)
    except UsageError as exc:
        _echo(f"Usage: {usage}\nTry '{hint}' for help.\n\nError: {exc}", err=True)
        return EXIT_ERROR
    except KeyboardInterrupt:
        _echo("Aborted!", err=True)
        return EXIT_INTERRUPTED


#: the cyclic garbage collector's first-generation threshold in the language server
#: (Python's default, 700, runs it ~80 times over an editor's first analysis for little)
GC_THRESHOLD = 30_000


def _collector_off() -> None:
    """The cyclic collector off for the rest of a ``check`` or ``fix``, which end the
    process when they end (:func:`_exit_now`). A run keeps it off anyway and runs a young
    pass of its own now and then (runner's ``_collect_now_and_then``); turned back on
    when the run ended, the collector's first pass scanned every object the run had made
    since its start, all of them still alive (270,000 on a TransformerEngine check), for
    nothing. (The server, ``harness`` and ``witness`` keep it: they run long, or run
    torch.) Only under :func:`main`: a command called in-process (:func:`run`, as the
    tests do) leaves the caller's collector alone."""
    if _UNDER_MAIN:
        gc.disable()


#: whether :func:`main` runs the command (and ends the process after it)
_UNDER_MAIN = False


def main() -> NoReturn:
    """The ``gradgate`` command: runs ``sys.argv`` and ends the process (:func:`_exit_now`)."""
    global _UNDER_MAIN
    enabled, _UNDER_MAIN = gc.isenabled(), True
    try:
        status = run(sys.argv[1:])
        if sys.getprofile() is None and sys.gettrace() is None:
            _exit_now(status)
    finally:
        _UNDER_MAIN = False
        if enabled:  # main called in-process (tests, a profiler): as it was
            gc.enable()
    sys.exit(status)  # a profiler or coverage writes its data at the interpreter's shutdown


def _status(code: object) -> int:
    """The exit status ``sys.exit(code)`` gives (a message is printed, and gives 2)."""
    if code is None:
        return EXIT_CLEAN
    if isinstance(code, int):
        return code
    _echo(str(code), err=True)
    return EXIT_ERROR


def _exit_now(status: int) -> NoReturn:
    """End the process with ``status`` as soon as the output is flushed, skipping the
    interpreter's shutdown: it frees every object the run made one by one (the
    project's parsed modules, the results) and runs a last collector pass over them,
    up to 0.1 s of a TransformerEngine check for memory the system takes back at once.
    Files are already written (atomically, closed) when a command returns; no
    ``atexit`` hook of gradgate's does anything. (mypy ends the same way.)"""
    for stream in (sys.stdout, sys.stderr):
        try:
            if not stream.closed:  # the language server closes stdout on `exit`
                stream.flush()
        except (OSError, ValueError):  # a closed pipe (`gradgate check | head`)
            status = status or EXIT_ERROR
    if "logging" in sys.modules:  # the language server's handlers
        sys.modules["logging"].shutdown()
    os._exit(status)


if __name__ == "__main__":
    main()
