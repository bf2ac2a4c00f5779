"""The ``gradgate`` command line. Only this module and the reporters print."""

from __future__ import annotations

import gc
import os
import sys
from typing import TYPE_CHECKING, Any, ClassVar

import click

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

FORMATS = ["text", "json", "sarif", "github", "junit", "gitlab"]


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


def _override(select, ignore, exclude, report_unused_ignores):
    """The command line's changes to a file's configuration (None: none)."""
    changes_select = _codes(select) if select else None
    extra_ignore = _codes(ignore)
    if not (changes_select or extra_ignore or exclude or report_unused_ignores):
        return None
    from .config import UNUSED_SUPPRESSION_CODE

    def apply(config):
        changes = {}
        if changes_select:
            changes["select"] = changes_select
        if extra_ignore:
            changes["ignore"] = (*config.ignore, *extra_ignore)
        if exclude:
            changes["exclude"] = (*config.exclude, *exclude)
        if report_unused_ignores:
            changes["extend_select"] = (*config.extend_select, UNUSED_SUPPRESSION_CODE)
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
) -> Invocation:
    from .runner import RunOptions
    from .settings import Resolver
    from .targets import collect

    paths = tuple(paths) or (".",)
    if "-" in paths and len(paths) > 1:
        raise click.UsageError("`-` (standard input) cannot be combined with other paths")
    if stdin_filename is not None and "-" not in paths and paths != (".",):
        raise click.UsageError("--stdin-filename is for `-` (standard input)")
    if stdin_filename is not None:
        paths = ("-",)
    resolver = Resolver(config_file, _override(select, ignore, exclude, report_unused_ignores))
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
        raise click.UsageError(str(exc)) from None
    if progress is None:
        progress = sys.stderr.isatty() and not os.environ.get("CI")
    options = RunOptions(
        fix=fix,
        prefilter=not no_prefilter,
        cache_dir=None if no_cache else (cache_dir or _default_cache_dir()),
        jobs=jobs,
        unsafe_fixes=unsafe_fixes,
        edits=edits,
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
            options = replace(invocation.options, root=settings.root)
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
    )


def _print_skipped(path: str, reason: str) -> None:
    click.echo(f"warning: {display(path)}: {reason}: not checked", err=True)


def _print_errors(results) -> list:
    errors = [r for r in results if r.error is not None]
    for result in errors:
        click.echo(f"error: {display(result.path)}: {display(result.error)}", err=True)
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

    def render(self, findings, errors, summary: bool = True, **sarif) -> str:
        from . import reporters

        if self.output_format == "json":
            return reporters.render_json(findings)
        if self.output_format == "sarif":
            return reporters.render_sarif(findings, errors, **sarif)
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
            text += reporters.summary(findings, len(errors), self.unsafe_fixes) + "\n"
        return text

    def write(self, text: str, err: bool = False) -> None:
        if self.output_file is not None and not err:
            try:
                with open(self.output_file, "w", encoding="utf-8", newline="") as handle:
                    handle.write(text)
            except OSError as exc:
                raise click.UsageError(f"cannot write {self.output_file}: {exc.strerror}") from None
            return
        click.echo(text, nl=False, err=err, color=_color(self.output_file) if self.output_format == "text" else None)


def _shared(function):
    """Options shared by ``check`` and ``fix``."""
    decorators = [
        click.argument("paths", nargs=-1, type=click.Path()),
        click.option(
            "--format",
            "output_format",
            type=click.Choice(FORMATS),
            default="text",
            show_default=True,
            help="Output format.",
        ),
        click.option(
            "--config",
            "config_file",
            type=click.Path(dir_okay=False),
            help="A gradgate.toml or pyproject.toml for every file (default: the nearest to each file).",
        ),
        click.option("--select", help="Comma-separated rule codes (or prefixes) to run."),
        click.option("--ignore", help="Comma-separated rule codes (or prefixes) to skip."),
        click.option("--exclude", multiple=True, help="Glob of paths to skip (repeatable)."),
        click.option(
            "--force-exclude/--no-force-exclude",
            default=True,
            show_default=True,
            help="Apply `exclude` to files named on the command line too (as pre-commit names them).",
        ),
        click.option(
            "--respect-gitignore/--no-respect-gitignore",
            default=True,
            show_default=True,
            help="Skip files ignored by git (.gitignore, .git/info/exclude).",
        ),
        click.option(
            "--stdin-filename", help="The path standard input (`-`) stands for: its config and ignores apply."
        ),
        click.option(
            "--unsafe-fixes/--no-unsafe-fixes",
            default=False,
            help="Also apply (and count as fixable) fixes that may change behaviour beyond the bug.",
        ),
        click.option("--show-fixes", is_flag=True, help="Show each finding's fix (check) or the fixes applied (fix)."),
        click.option("--exit-zero", is_flag=True, help="Exit 0 even when findings are left (2 still means errors)."),
        click.option("--output-file", "-o", type=click.Path(dir_okay=False), help="Write the report to this file."),
        click.option("--quiet", "-q", is_flag=True, help="Print the findings and errors only: no summary or counts."),
        click.option("--no-cache", is_flag=True, help="Neither read nor write the result cache."),
        click.option(
            "--cache-dir",
            type=click.Path(file_okay=False),
            help="Cache folder (default: $GRADGATE_CACHE_DIR, else the user's cache directory, ~/.cache/gradgate).",
        ),
        click.option("--jobs", "-j", type=click.IntRange(min=1), help="Worker processes (default: CPUs)."),
        click.option(
            "--no-prefilter",
            is_flag=True,
            hidden=True,
            help="Analyse every file fully with LibCST (slow; for verification).",
        ),
        click.option(
            "--progress/--no-progress",
            default=None,
            help="Progress bar on stderr (default: when stderr is a terminal, not in CI).",
        ),
    ]
    for decorator in reversed(decorators):
        function = decorator(function)
    return function


class _Command(click.Command):
    """A command whose "Did you mean" never suggests a hidden option."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        try:
            return super().parse_args(ctx, args)
        except click.NoSuchOption as exc:
            hidden = {name for p in self.params if getattr(p, "hidden", False) for name in (*p.opts, *p.secondary_opts)}
            if exc.possibilities:
                # click's stubs mark it Final; replacing the exception would lose its context
                exc.possibilities = [p for p in exc.possibilities if p not in hidden]  # type: ignore[misc]
            raise


class _Group(click.Group):
    """Loads the optional ``harness`` and ``witness`` commands (and their modules) only
    when they are used: ``check`` and ``fix`` start without them."""

    LAZY: ClassVar[dict[str, str]] = {"harness": "gradgate.harness.cli", "witness": "gradgate.witness.cli"}

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.LAZY})

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name in self.LAZY and name not in self.commands:
            import importlib

            try:
                module = importlib.import_module(self.LAZY[name])
            except ImportError:  # the harness package is optional
                return None
            self.add_command(getattr(module, name))
        return super().get_command(ctx, name)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="gradgate")
def cli() -> None:
    """Find and fix forward-path decisions gated on PyTorch grad mode."""


@cli.command(cls=_Command)
@_shared
@click.option("--show-source", is_flag=True, help="Show the source line and a fix hint.")
@click.option("--statistics", is_flag=True, help="Count findings per rule instead of listing them.")
@click.option(
    "--baseline",
    "baseline_file",
    type=click.Path(dir_okay=False),
    help="Report only findings not recorded in this baseline file.",
)
@click.option(
    "--write-baseline",
    "write_baseline_file",
    type=click.Path(dir_okay=False),
    help="Record the current findings in this file and exit 0.",
)
@click.option(
    "--add-noqa", is_flag=True, help="Add a `# gradgate: ignore[CODE]` comment on each finding's line; exit 0."
)
@click.option(
    "--report-unused-ignores",
    is_flag=True,
    help="Also report `# gradgate: ignore` comments that suppress nothing (GG100).",
)
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
) -> None:
    """Report grad-mode gated forward decisions under PATHS (default: .; `-`: standard input)."""
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
    )
    out = Output(output_format, show_source, show_fixes, statistics, quiet, output_file, unsafe_fixes)
    results = list(_results(invocation))
    if edits:  # the files analysed have their edits; a cached result or standard input may not
        from .document import with_edits

        results = [with_edits(r, invocation.resolver.for_path(r.path).config) if r.findings else r for r in results]
    errors = _print_errors(results)
    findings = sorted((f for r in results for f in r.findings), key=Finding.sort_key)
    if add_noqa:
        if invocation.stdin_filename is not None:
            raise click.UsageError("--add-noqa rewrites files: it cannot read standard input")
        _add_noqa(results, quiet)
        sys.exit(EXIT_ERROR if errors else EXIT_CLEAN)
    root = os.getcwd()
    if write_baseline_file or baseline_file:
        from . import baseline
    if write_baseline_file:
        try:
            count = baseline.write(write_baseline_file, findings, root)
        except baseline.BaselineError as exc:
            raise click.UsageError(str(exc)) from None
        click.echo(f"Wrote {count} finding{'s' if count != 1 else ''} to {display(write_baseline_file)}.", err=True)
        sys.exit(EXIT_ERROR if errors else EXIT_CLEAN)
    sarif: dict[str, Any] = {}
    if baseline_file:
        try:
            known = baseline.load(baseline_file)
        except baseline.BaselineError as exc:
            raise click.UsageError(str(exc)) from None
        total = findings
        findings = baseline.new_findings(findings, known, root)
        new = {id(f) for f in findings}
        sarif = {"baselined": [f for f in total if id(f) not in new], "baseline_file": baseline_file}
        if len(total) != len(findings) and output_format == "text" and not quiet:
            click.echo(f"{len(total) - len(findings)} finding(s) in the baseline not shown.", err=True)
    sarif["suppressed"] = sorted((f for r in results for f in r.suppressed), key=lambda f: f.sort_key())
    out.write(out.render(findings, errors, **(sarif if output_format == "sarif" else {})))
    sys.exit(EXIT_ERROR if errors else EXIT_FINDINGS if findings and not exit_zero else EXIT_CLEAN)


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
            click.echo(f"error: {result.path}: {exc}", err=True)
            continue
        total += added
        files += 1
    if not quiet:
        click.echo(
            f"Added {total} suppression{'s' if total != 1 else ''} in {files} file{'s' if files != 1 else ''}.",
            err=True,
        )


@cli.command(cls=_Command)
@_shared
@click.option("--diff", is_flag=True, help="Print a unified diff of the fixes; write nothing (exit 1 if any).")
@click.option("--exit-non-zero-on-fix", is_flag=True, help="Exit 1 when a file was fixed, even if nothing is left.")
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
) -> None:
    """Fix what can be fixed under PATHS (default: .); report what is left.

    A file is rewritten only when its fixed text re-parses, atomically, keeping its
    encoding, line endings and permissions, and never if it changed since it was read.
    With `-` the fixed standard input goes to standard output, the findings left to
    standard error.
    """
    _collector_off()
    from . import reporters
    from .records import replace
    from .results import FileResult, Finding
    from .source import SourceError, write_atomic

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
    )
    out = Output(output_format, False, show_fixes, False, quiet, output_file, unsafe_fixes)
    stdin = invocation.stdin_filename is not None
    results: list[FileResult] = []
    changed: list[FileResult] = []
    for result in _results(invocation):
        if stdin:
            if diff:
                if result.changed:
                    click.echo(reporters.unified_diff(result), nl=False)
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
                click.echo(reporters.unified_diff(result), nl=False)
            else:
                try:
                    write_atomic(result.path, result.source, result.fixed)
                except SourceError as exc:
                    # nothing was written: every finding of the file is still there
                    unfixed = (*result.fixed_findings, *result.findings)
                    result = FileResult(result.path, tuple(sorted(unfixed, key=Finding.sort_key)), error=str(exc))
            done = result.error is None
        if result.source is not None or result.fixed is not None:
            # written (or shown): what follows needs the findings, not the bytes; a fix of
            # many files then holds one file's bytes at a time
            result = replace(result, source=None, fixed=None)
        if done:
            changed.append(result)
        results.append(result)
    errors = _print_errors(results)
    remaining = sorted((f for r in results for f in r.findings), key=Finding.sort_key)
    verb = "Would fix" if diff else "Fixed"
    total = sum(len(r.fixed_findings) for r in changed)
    if not quiet:
        for result in changed:
            n = len(result.fixed_findings)
            click.echo(f"{verb} {n} finding{'s' if n != 1 else ''} in {display(result.path)}", err=True)
        if show_fixes and changed:
            click.echo(reporters.render_fixed(changed), nl=False, err=True)
        click.echo(
            f"{verb} {total} finding{'s' if total != 1 else ''} in {len(changed)} "
            f"file{'s' if len(changed) != 1 else ''}; {len(remaining)} left.",
            err=True,
        )
    if output_format != "text":
        out.write(out.render(remaining, errors))
    elif remaining:
        # with --diff or `-`, stdout is the patch or the code: the findings left go to stderr
        text = reporters.render_text(remaining, color=_color(output_file), unsafe_fixes=unsafe_fixes)
        if output_file is not None:
            out.write(text)
        else:
            click.echo(text, nl=False, err=diff or stdin, color=_color(None))
    if errors:
        sys.exit(EXIT_ERROR)
    pending = remaining and not exit_zero
    fixed_something = total > 0 and (diff or exit_non_zero_on_fix)
    sys.exit(EXIT_FINDINGS if pending or fixed_something else EXIT_CLEAN)


@cli.command()
def server() -> None:
    """Run the language server over stdio (needs the `lsp` extra: pip install 'gradgate[lsp]')."""
    try:
        from .server import main as serve
    except ImportError as exc:
        raise click.UsageError(
            f"the language server needs pygls and lsprotocol ({exc}): install gradgate with the `lsp` extra"
        ) from None
    # a long-lived process: the collector's first generation is made less eager
    gc.set_threshold(GC_THRESHOLD, *gc.get_threshold()[1:])
    serve()


@cli.command(name="rules")
def list_rules() -> None:
    """List the rules."""
    from .rule import all_rules

    for rule in all_rules():
        click.echo(f"{rule.CODE}  {rule.NAME}  {rule.MESSAGE}")


@cli.command()
@click.argument("code")
def explain(code: str) -> None:
    """Print a rule's documentation."""
    from .rule import rule_by_code

    rule = rule_by_code().get(code.upper())
    if rule is None:
        raise click.UsageError(f"unknown rule {code!r}; `gradgate rules` lists them")
    click.echo(f"# {rule.CODE} {rule.NAME}\n\n{rule.documentation()}")


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
    torch.) Only under :func:`main`: the command called in-process (click's test
    runner) leaves the caller's collector alone."""
    if _UNDER_MAIN:
        gc.disable()


#: whether :func:`main` runs the command (and ends the process after it)
_UNDER_MAIN = False


def main() -> None:
    global _UNDER_MAIN
    enabled, _UNDER_MAIN = gc.isenabled(), True
    try:
        cli(prog_name="gradgate")  # click's standalone mode ends in SystemExit
    except SystemExit as end:
        if sys.getprofile() is not None or sys.gettrace() is not None:
            raise  # a profiler or coverage writes its data at the interpreter's shutdown
        _exit_now(end.code)
    finally:
        _UNDER_MAIN = False
        if enabled:  # main called in-process (tests, a profiler): as it was
            gc.enable()


def _exit_now(code: object) -> None:
    """End the process with ``code`` (``sys.exit``'s argument) as soon as the output is
    flushed, skipping the interpreter's shutdown: it frees every object the run made
    one by one (the project's parsed modules, the results) and runs a last collector
    pass over them, up to 0.1 s of a TransformerEngine check for memory the system takes
    back at once. Files are already written (atomically, closed) when a command
    returns; no ``atexit`` hook of gradgate's does anything. (mypy ends the same way.)"""
    if code is None:
        status = EXIT_CLEAN
    elif isinstance(code, int):
        status = code
    else:  # sys.exit("message")
        print(code, file=sys.stderr)
        status = EXIT_ERROR
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe (`gradgate check | head`)
            status = status or EXIT_ERROR
    if "logging" in sys.modules:  # the language server's handlers
        sys.modules["logging"].shutdown()
    os._exit(status)


if __name__ == "__main__":
    main()
