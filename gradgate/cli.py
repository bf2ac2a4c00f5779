"""The ``gradgate`` command line. The only module (with the reporters) that prints."""

from __future__ import annotations

import sys

import click

from . import __version__
from .config import Config, ConfigError

EXIT_CLEAN = 0
EXIT_FINDINGS = 1
EXIT_ERROR = 2


def _print_errors(results) -> int:
    errors = [r for r in results if r.error is not None]
    for result in errors:
        click.echo(f"error: {result.path}: {result.error}", err=True)
    return len(errors)


def _config(select: str | None, ignore: str | None) -> Config:
    def codes(value: str | None) -> tuple[str, ...]:
        return tuple(c.strip() for c in value.split(",") if c.strip()) if value else ()

    try:
        return Config(select=codes(select) or None, ignore=codes(ignore))
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from None


_paths = click.argument("paths", nargs=-1, type=click.Path())
_format = click.option(
    "--format", "output_format", type=click.Choice(["text", "json"]), default="text",
    show_default=True, help="Output format.",
)
_select = click.option("--select", help="Comma-separated rule codes (or prefixes) to run.")
_ignore = click.option("--ignore", help="Comma-separated rule codes (or prefixes) to skip.")


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="gradgate")
def cli() -> None:
    """Find and fix forward-path decisions gated on PyTorch grad mode."""


def _emit(findings, output_format: str, show_source: bool, errors: int) -> None:
    from . import reporters

    if output_format == "json":
        click.echo(reporters.render_json(findings), nl=False)
        return
    click.echo(reporters.render_text(findings, show_source=show_source), nl=False)
    click.echo(reporters.summary(findings, errors))


@cli.command()
@_paths
@_format
@_select
@_ignore
@click.option("--show-source", is_flag=True, help="Show the source line and a fix hint.")
def check(paths, output_format, select, ignore, show_source) -> None:
    """Report grad-mode gated forward decisions under PATHS (default: .)."""
    from .engine import lint_paths

    result = lint_paths(paths or (".",), _config(select, ignore))
    errors = _print_errors(result.files)
    findings = result.findings
    _emit(findings, output_format, show_source, errors)
    sys.exit(EXIT_ERROR if errors else EXIT_FINDINGS if findings else EXIT_CLEAN)


@cli.command()
@_paths
@_format
@_select
@_ignore
@click.option("--diff", is_flag=True, help="Print a unified diff of the fixes; write nothing.")
def fix(paths, output_format, select, ignore, diff) -> None:
    """Fix what can be fixed under PATHS (default: .); report what is left."""
    from . import reporters
    from .engine import FileResult, iter_lint
    from .source import SourceError, write_atomic

    results: list[FileResult] = []
    changed: list[FileResult] = []
    for result in iter_lint(paths or (".",), _config(select, ignore), fix=True):
        if result.changed:
            if diff:
                click.echo(reporters.unified_diff(result), nl=False)
            else:
                try:
                    write_atomic(result.path, result.source, result.fixed)
                except SourceError as exc:
                    result = FileResult(result.path, result.findings, error=str(exc))
            if result.error is None:
                changed.append(result)
        results.append(result)
    errors = _print_errors(results)
    remaining = sorted((f for r in results for f in r.findings), key=lambda f: f.sort_key())
    verb = "Would fix" if diff else "Fixed"
    for result in changed:
        n = len(result.fixed_findings)
        click.echo(f"{verb} {n} finding{'s' if n != 1 else ''} in {result.path}", err=True)
    total = sum(len(r.fixed_findings) for r in changed)
    click.echo(
        f"{verb} {total} finding{'s' if total != 1 else ''} in {len(changed)} "
        f"file{'s' if len(changed) != 1 else ''}; {len(remaining)} left.",
        err=True,
    )
    if output_format == "json":
        click.echo(reporters.render_json(remaining), nl=False)
    elif remaining:
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


def main() -> None:
    cli(prog_name="gradgate")


if __name__ == "__main__":
    main()
