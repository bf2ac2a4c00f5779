"""Every rule's own VALID and INVALID cases, one test each (Fixit style), run through
the engine exactly as the CLI runs it; and the same cases with the pre-filters off,
which must give the same findings (the pre-filters are an optimisation, never a filter
of results)."""

from __future__ import annotations

import pytest

from gradgate.config import Config
from gradgate.engine import lint_source
from gradgate.rule import all_rules


def _cases(kind: str):
    for rule in all_rules():
        for index, case in enumerate(getattr(rule, kind)):
            yield pytest.param(rule, case, id=f"{rule.CODE}-{kind.lower()}-{index}")


def _lint(rule, code: str, fix: bool = False, prefilter: bool = True):
    # a default rule alone; a rule that is off by default beside the default ones
    config = Config(select=(rule.CODE,)) if rule.DEFAULT_ENABLED else Config(extend_select=(rule.CODE,))
    return lint_source("case.py", code.encode(), config, fix=fix, prefilter=prefilter)


@pytest.mark.parametrize("prefilter", [True, False], ids=["fast", "whole-module"])
@pytest.mark.parametrize(("rule", "case"), list(_cases("VALID")))
def test_valid(rule, case, prefilter):
    result = _lint(rule, case.code, prefilter=prefilter)
    assert result.error is None
    assert [(f.line, f.column, f.message) for f in result.findings] == []


@pytest.mark.parametrize("prefilter", [True, False], ids=["fast", "whole-module"])
@pytest.mark.parametrize(("rule", "case"), list(_cases("INVALID")))
def test_invalid(rule, case, prefilter):
    result = _lint(rule, case.code, prefilter=prefilter)
    assert result.error is None
    assert len(result.findings) == case.count
    first = result.findings[0]
    assert rule.CODE in {f.rule for f in result.findings}
    assert (first.line, first.column) == (case.line, case.column)
    assert all(f.fixable == (case.expected_replacement is not None) for f in result.findings if f.rule == rule.CODE)

    fixed = _lint(rule, case.code, fix=True, prefilter=prefilter)
    assert fixed.error is None
    if case.expected_replacement is None:
        assert fixed.fixed is None
        assert len(fixed.findings) == case.count
    else:
        assert fixed.fixed.decode() == case.expected_replacement
        assert fixed.findings == ()
        assert len(fixed.fixed_findings) == case.count
        # fixing is idempotent
        again = _lint(rule, case.expected_replacement, fix=True, prefilter=prefilter)
        assert again.fixed is None and again.findings == ()


def test_rules_have_unique_codes_and_cases():
    rules = all_rules()
    assert [r.CODE for r in rules] == sorted({r.CODE for r in rules})
    for rule in rules:
        assert rule.VALID and rule.INVALID, rule.CODE
        assert rule.NAME and rule.MESSAGE


@pytest.mark.parametrize("rule", all_rules(), ids=lambda r: r.CODE)
def test_rule_documentation_has_every_section(rule):
    assert rule.missing_doc_sections() == []


def test_rule_modules_are_named_after_their_codes():
    """gradgate.registry derives the known codes from module names (without importing
    LibCST); every rule module must start with its code."""
    from gradgate.registry import known_codes

    for rule in all_rules():
        assert rule.__module__.rsplit(".", 1)[-1].startswith(rule.CODE.lower() + "_")
    assert known_codes() == {r.CODE for r in all_rules()}
