"""The ``gradgate`` command line. Only this module and the reporters print."""

from __future__ import annotations

import gc
import os
import sys
from dataclasses import dataclass

import click

from . import __version__
from .config import ConfigError
from .escape import display

EXIT_CLEAN = 0
EXIT_FINDINGS = 1
EXIT_ERROR = 2

FORMATS = ["text", "json", "sarif", "github"]


def _codes(value: str | None) -> tuple[str, ...]:
    return tuple(c.strip().upper() for c in value.split(",") if c.strip()) if value else ()


@dataclass
class Invocation:
    """What the shared options of ``check`` and ``fix`` resolve to."""

    paths: tuple[str, ...]
    settings: object  # gradgate.settings.Settings
    options: object  # gradgate.runner.RunOptions
    progress: bool


def _invocation(paths, config_file, select, ignore, exclude, no_cache, cache_dir, jobs,
                no_prefilter, progress, fix, report_unused_ignores=False) -> Invocation:
    from . import settings as settings_module
    from .cache import default_cache_dir
    from .runner import RunOptions

    paths = tuple(paths) or (".",)
    try:
        settings = settings_module.resolve(paths, config_file)
        config = settings.config
        changes = {}
        if select:
            changes["select"] = _codes(select)
        if ignore:
            changes["ignore"] = (*config.ignore, *_codes(ignore))
        if exclude:
            changes["exclude"] = (*config.exclude, *exclude)
        if report_unused_ignores:
            from .config import UNUSED_SUPPRESSION_CODE

            changes["extend_select"] = (*config.extend_select, UNUSED_SUPPRESSION_CODE)
        if changes:
            config = config.with_changes(**changes)
            settings = settings_module.Settings(config, settings.source, settings.root)
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from None
    if progress is None:
        progress = sys.stderr.isatty() and not os.environ.get("CI")
    options = RunOptions(
        fix=fix,
        prefilter=not no_prefilter,
        cache_dir=None if no_cache else (cache_dir or default_cache_dir()),
        jobs=jobs,
        root=settings.root,
    )
    return Invocation(paths, settings, options, progress)


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
    from .runner import run

    progress = _Progress(invocation.progress)
    try:
        yield from run(invocation.paths, invocation.settings.config, invocation.options, progress,
                       skipped=_print_skipped)
    finally:
        progress.close()


def _print_skipped(path: str, reason: str) -> None:
    click.echo(f"warning: {display(path)}: {reason}: not checked", err=True)


def _print_errors(results) -> list:
    errors = [r for r in results if r.error is not None]
    for result in errors:
        click.echo(f"error: {display(result.path)}: {display(result.error)}", err=True)
    return errors


def _emit(findings, output_format: str, show_source: bool, errors: list, summary: bool = True) -> None:
    from . import reporters

    if output_format == "json":
        click.echo(reporters.render_json(findings), nl=False)
    elif output_format == "sarif":
        click.echo(reporters.render_sarif(findings, errors), nl=False)
    elif output_format == "github":
        click.echo(reporters.render_github(findings), nl=False)
    else:
        click.echo(reporters.render_text(findings, show_source=show_source), nl=False)
        if summary:
            click.echo(reporters.summary(findings, len(errors)))


def _shared(function):
    """Options shared by ``check`` and ``fix``."""
    decorators = [
        click.argument("paths", nargs=-1, type=click.Path()),
        click.option("--format", "output_format", type=click.Choice(FORMATS), default="text",
                     show_default=True, help="Output format."),
        click.option("--config", "config_file", type=click.Path(dir_okay=False),
                     help="A pyproject.toml to read [tool.gradgate] from (default: found upward)."),
        click.option("--select", help="Comma-separated rule codes (or prefixes) to run."),
        click.option("--ignore", help="Comma-separated rule codes (or prefixes) to skip."),
        click.option("--exclude", multiple=True, help="Glob of paths to skip (repeatable)."),
        click.option("--no-cache", is_flag=True, help="Neither read nor write the result cache."),
        click.option("--cache-dir", type=click.Path(file_okay=False),
                     help="Cache folder (default: $GRADGATE_CACHE_DIR, else the user's cache "
                          "directory, ~/.cache/gradgate)."),
        click.option("--jobs", "-j", type=click.IntRange(min=1), help="Worker processes (default: CPUs)."),
        click.option("--no-prefilter", is_flag=True, hidden=True,
                     help="Analyse every file fully with LibCST (slow; for verification)."),
        click.option("--progress/--no-progress", default=None,
                     help="Progress bar on stderr (default: when stderr is a terminal, not in CI)."),
    ]
    for decorator in reversed(decorators):
        function = decorator(function)
    return function


class _Group(click.Group):
    """Loads the optional ``harness`` and ``witness`` commands (and their modules) only
    when they are used: ``check`` and ``fix`` start without them."""

    LAZY = {"harness": "gradgate.harness.cli", "witness": "gradgate.witness.cli"}

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


@cli.command()
@_shared
@click.option("--show-source", is_flag=True, help="Show the source line and a fix hint.")
@click.option("--baseline", "baseline_file", type=click.Path(dir_okay=False),
              help="Report only findings not recorded in this baseline file.")
@click.option("--write-baseline", "write_baseline_file", type=click.Path(dir_okay=False),
              help="Record the current findings in this file and exit 0.")
@click.option("--report-unused-ignores", is_flag=True,
              help="Also report `# gradgate: ignore` comments that suppress nothing (GG100).")
def check(paths, output_format, config_file, select, ignore, exclude, no_cache, cache_dir,
          jobs, no_prefilter, progress, show_source, baseline_file, write_baseline_file,
          report_unused_ignores) -> None:
    """Report grad-mode gated forward decisions under PATHS (default: .)."""
    from .results import Finding

    invocation = _invocation(paths, config_file, select, ignore, exclude, no_cache, cache_dir,
                             jobs, no_prefilter, progress, fix=False,
                             report_unused_ignores=report_unused_ignores)
    results = list(_results(invocation))
    if output_format in ("json", "sarif"):  # fix edits for the consumers that apply them
        from .engine import attach_edits

        results = [attach_edits(r, invocation.settings.config) for r in results]
    errors = _print_errors(results)
    findings = sorted((f for r in results for f in r.findings), key=Finding.sort_key)
    root = invocation.settings.root
    if write_baseline_file or baseline_file:
        from . import baseline
    if write_baseline_file:
        try:
            count = baseline.write(write_baseline_file, findings, root)
        except baseline.BaselineError as exc:
            raise click.UsageError(str(exc)) from None
        click.echo(f"Wrote {count} finding{'s' if count != 1 else ''} to {display(write_baseline_file)}.", err=True)
        sys.exit(EXIT_ERROR if errors else EXIT_CLEAN)
    if baseline_file:
        try:
            known = baseline.load(baseline_file)
        except baseline.BaselineError as exc:
            raise click.UsageError(str(exc)) from None
        total = len(findings)
        findings = baseline.new_findings(findings, known, root)
        if total != len(findings) and output_format == "text":
            click.echo(f"{total - len(findings)} finding(s) in the baseline not shown.", err=True)
    _emit(findings, output_format, show_source, errors)
    sys.exit(EXIT_ERROR if errors else EXIT_FINDINGS if findings else EXIT_CLEAN)


@cli.command()
@_shared
@click.option("--diff", is_flag=True, help="Print a unified diff of the fixes; write nothing.")
def fix(paths, output_format, config_file, select, ignore, exclude, no_cache, cache_dir, jobs,
        no_prefilter, progress, diff) -> None:
    """Fix what can be fixed under PATHS (default: .); report what is left.

    A file is rewritten only when its fixed text re-parses, atomically, keeping its
    encoding, line endings and permissions, and never if it changed since it was read.
    """
    from . import reporters
    from .results import FileResult, Finding
    from .source import SourceError, write_atomic

    invocation = _invocation(paths, config_file, select, ignore, exclude, no_cache, cache_dir,
                             jobs, no_prefilter, progress, fix=True)
    results: list[FileResult] = []
    changed: list[FileResult] = []
    for result in _results(invocation):
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
            if result.error is None:
                changed.append(result)
        results.append(result)
    errors = _print_errors(results)
    remaining = sorted((f for r in results for f in r.findings), key=Finding.sort_key)
    verb = "Would fix" if diff else "Fixed"
    for result in changed:
        n = len(result.fixed_findings)
        click.echo(f"{verb} {n} finding{'s' if n != 1 else ''} in {display(result.path)}", err=True)
    total = sum(len(r.fixed_findings) for r in changed)
    click.echo(
        f"{verb} {total} finding{'s' if total != 1 else ''} in {len(changed)} "
        f"file{'s' if len(changed) != 1 else ''}; {len(remaining)} left.",
        err=True,
    )
    if output_format != "text":
        _emit(remaining, output_format, False, errors)
    elif remaining:
        # with --diff, stdout is the patch: the findings left go to stderr
        click.echo(reporters.render_text(remaining), nl=False, err=diff)
    sys.exit(EXIT_ERROR if errors else EXIT_FINDINGS if remaining else EXIT_CLEAN)


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


#: the cyclic garbage collector's first-generation threshold for a gradgate process
GC_THRESHOLD = 30_000


def main() -> None:
    # A run allocates in bursts and keeps most of it (LibCST's import makes thousands of
    # classes and functions, an ast parse tens of thousands of nodes), so with Python's
    # default threshold (700) the collector runs ~80 times in a single-file check for
    # little. At 30,000 it runs 13 times: about 6 ms less of a 0.3 s check, and no slower,
    # for 4 MiB more, on a run that sends every file through LibCST (benchmarks/README.md).
    # Cycles are still collected: with the collector off, that run needs 45 MiB more.
    gc.set_threshold(GC_THRESHOLD, *gc.get_threshold()[1:])
    cli(prog_name="gradgate")


if __name__ == "__main__":
    main()
