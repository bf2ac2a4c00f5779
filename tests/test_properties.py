"""Property-based reliability tests of the engine.

Inputs: a targeted generator of GG001 material (``strategies.gg_programs``) in every
encoding / BOM / line-ending style, hypothesmith programs (with GG001 blocks planted
between their statements), arbitrary and mutated bytes, and real TransformerEngine
sources with grad-mode operands inserted into random predicates. Properties (see
``strategies.verify``): no exception escapes the engine, errors are one line, every fix
re-parses (CPython and LibCST), keeps encoding, BOM, line endings and statements, only
removes bytes, is idempotent, leaves no fixable finding and no reported fixed location,
and a file without findings is left byte-identical. Example counts are bounded for CI
and failures are not shrunk unless ``GRADGATE_SHRINK=1``; ``tests/fuzz.py`` runs the
same checks for as long as one wants.
"""

from __future__ import annotations

import os
import random
import warnings
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, assume, given, settings
from hypothesis import strategies as st

from gradgate.engine import lint_source
from strategies import (
    CONFIG,
    encode_variant,
    gg_programs,
    mutate_source,
    splice,
    verify,
)

hypothesmith = pytest.importorskip("hypothesmith")

#: Shrinking a failure can take minutes (each step runs the engine several times), so
#: CI reports the failing example as found; GRADGATE_SHRINK=1 shrinks it to a minimal one.
_PHASES = tuple(Phase) if os.environ.get("GRADGATE_SHRINK") == "1" else (
    Phase.explicit, Phase.reuse, Phase.generate)
CI = settings(max_examples=50, deadline=None, database=None, phases=_PHASES,
              suppress_health_check=list(HealthCheck))
SLOW = settings(CI, max_examples=20)


def _fail_on(outcome, data: bytes) -> None:
    assert not outcome.violations, "\n".join(outcome.violations) + f"\ninput: {data!r}"


def _assert_expected_positions(program, variant, data: bytes) -> None:
    result = lint_source("t.py", data, CONFIG)
    assert result.error is None, result.error
    found = {(f.line, f.column): f for f in result.findings}
    for line, column, code in program.expected:
        key = (line + variant.line_shift, column)
        assert key in found, f"planted `{code}` at {key} not reported; got {sorted(found)}\n{data!r}"
        finding = found[key]
        if finding.end_line == finding.line:
            assert finding.source_line[finding.column - 1:finding.end_column - 1] == code


# -- targeted programs ------------------------------------------------------------
@CI
@given(gg_programs(), st.data())
def test_generated_programs(program, data):
    """LF / CRLF / lone CR / mixed endings, UTF-8 / BOM / latin-1 cookie, spaces / tabs,
    no final newline, blank lines at the end: all analysed, and fixed without damage."""
    variant = data.draw(encode_variant(program.text, lone_cr=True))
    outcome = verify(variant.data)
    assert outcome.error is None, f"{outcome.error}\n{variant.data!r}"
    _fail_on(outcome, variant.data)
    _assert_expected_positions(program, variant, variant.data)


# -- hypothesmith -----------------------------------------------------------------
def _quiet(strategy):
    warnings.simplefilter("ignore")
    return strategy


@CI
@given(_quiet(hypothesmith.from_grammar()))
def test_hypothesmith_programs_unchanged(source):
    """Generated programs hold no finding: the engine survives them and changes nothing."""
    outcome = verify(source.encode("utf-8", "surrogatepass"))
    _fail_on(outcome, source.encode("utf-8", "surrogatepass"))
    assert outcome.fixed == 0


@CI
@given(_quiet(hypothesmith.from_grammar()), gg_programs(), st.integers(0, 1000), st.data())
def test_hypothesmith_programs_with_planted_blocks(host, program, where, data):
    text = splice(host, program.text, where)
    variant = data.draw(encode_variant(text))
    try:
        variant.data.decode(variant.encoding)
    except UnicodeError:  # pragma: no cover - surrogates from the grammar
        assume(False)
    outcome = verify(variant.data)
    _fail_on(outcome, variant.data)


@SLOW
@given(_quiet(hypothesmith.from_node()), gg_programs(), st.integers(0, 1000))
def test_hypothesmith_node_programs_with_planted_blocks(host, program, where):
    text = splice(host, program.text, where)
    data = text.encode("utf-8", "surrogatepass")
    _fail_on(verify(data), data)


# -- bytes --------------------------------------------------------------------------
@CI
@given(st.binary(max_size=2000))
def test_arbitrary_bytes(data):
    outcome = verify(data)
    _fail_on(outcome, data)


@CI
@given(gg_programs(), st.data())
def test_byte_mutations_of_programs(program, data):
    """Flip, insert and delete random bytes (undecodable, NUL, broken syntax...)."""
    variant = data.draw(encode_variant(program.text))
    raw = bytearray(variant.data)
    for _ in range(data.draw(st.integers(1, 6))):
        op = data.draw(st.sampled_from(["flip", "insert", "delete"]))
        at = data.draw(st.integers(0, max(len(raw) - 1, 0)))
        byte = data.draw(st.sampled_from([0, 0x0C, 0x0D, 0x0A, 0x09, 0x20, 0x28, 0x29, 0x5C,
                                          0x23, 0x22, 0x80, 0xFF, 0xC3, 0xE9, 0xEF]))
        if op == "flip" and raw:
            raw[at] = byte
        elif op == "insert":
            raw.insert(at, byte)
        elif raw:
            del raw[at]
    outcome = verify(bytes(raw))
    _fail_on(outcome, bytes(raw))


# -- real TransformerEngine sources, mutated ----------------------------------------
def _and_assign_sites(tree) -> int:
    import ast

    return sum(
        1 for node in ast.walk(tree)
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.BoolOp)
        and isinstance(node.value.op, ast.And)
    )


@pytest.fixture(scope="module")
def te_files(te_sources) -> list[tuple[str, bytes]]:
    """The TE 2.20.2 ``transformer_engine/pytorch`` files under 60 kB holding ``x = a and
    b`` assignments (about twenty; bounded so that CI stays fast: ``fuzz.py`` mutates
    every TE file, the big modules included)."""
    import ast

    root = Path(te_sources) / "transformer_engine" / "pytorch"
    out = []
    for path in sorted(root.rglob("*.py")):
        data = path.read_bytes()
        if len(data) < 60_000 and _and_assign_sites(ast.parse(data)):
            out.append((str(path.relative_to(te_sources)), data))
    assert len(out) >= 10
    return out


@SLOW
@given(st.data())
def test_mutated_te_sources(te_files, data):
    path, source = data.draw(st.sampled_from(te_files), label="file")
    rng = random.Random(data.draw(st.integers(0, 2**32 - 1), label="seed"))
    mutated, mutations = mutate_source(source, rng, data.draw(st.integers(1, 8), label="count"))
    outcome = verify(mutated, path=path, whole_module=False, cst_reparse=False)
    assert outcome.error is None, outcome.error
    assert not outcome.violations, f"{path} {mutations}: " + "\n".join(outcome.violations)


@SLOW
@given(st.data())
def test_planted_gate_in_te_is_reported_and_fix_removes_exactly_it(te_files, data):
    """Rename an assignment's target to a comm flag (``renamed``), then append
    `` and torch.is_grad_enabled()`` after one of its ``and`` operands (``planted``):
    the planted operand is reported at its exact position, and fixing the planted file
    gives the same bytes as fixing the renamed one."""
    import ast

    path, source = data.draw(st.sampled_from(te_files), label="file")
    tree = ast.parse(source)
    sites = [
        node for node in ast.walk(tree)
        if isinstance(node, ast.Assign) and len(node.targets) == 1
        and isinstance(node.targets[0], ast.Name)
        and isinstance(node.value, ast.BoolOp) and isinstance(node.value.op, ast.And)
    ]
    assume(sites)
    node = data.draw(st.sampled_from(sites), label="site")
    operand = data.draw(st.sampled_from(
        [v for v in node.value.values if isinstance(v, (ast.Name, ast.Attribute, ast.Call, ast.Subscript))]
        or [None]), label="operand")
    assume(operand is not None)
    lines = source.splitlines(keepends=True)
    target = node.targets[0]

    def edit(buf: list[bytes], line: int, start: int, end: int, new: bytes) -> None:
        buf[line - 1] = buf[line - 1][:start] + new + buf[line - 1][end:]

    renamed = list(lines)
    planted = list(lines)
    grad = b" and torch.is_grad_enabled()"
    # the operand comes after the target, so edit it first
    edit(planted, operand.end_lineno, operand.end_col_offset, operand.end_col_offset, grad)
    for buf in (renamed, planted):
        edit(buf, target.lineno, target.col_offset, target.end_col_offset, b"ub_overlap_ag")
    renamed_b, planted_b = b"".join(renamed), b"".join(planted)
    shift = len(b"ub_overlap_ag") - (target.end_col_offset - target.col_offset)
    column = operand.end_col_offset + (shift if operand.end_lineno == target.lineno else 0)
    line_text = planted[operand.end_lineno - 1]
    column_chars = len(line_text[:column].decode()) + len(" and ") + 1
    check = lint_source(path, planted_b, CONFIG)
    assert check.error is None
    assert (operand.end_lineno, column_chars) in {(f.line, f.column) for f in check.findings}
    fixed_planted = lint_source(path, planted_b, CONFIG, fix=True)
    fixed_renamed = lint_source(path, renamed_b, CONFIG, fix=True)
    assert fixed_planted.error is None and fixed_renamed.error is None
    expected = fixed_renamed.fixed if fixed_renamed.fixed is not None else renamed_b
    assert fixed_planted.fixed == expected


def test_te_sources_unmutated_are_stable(te_sources, te_files):
    """The baseline: real TE files pass every property, the two modules holding the
    three real findings included."""
    module = Path(te_sources) / "transformer_engine" / "pytorch" / "module"
    real = [(f"module/{n}", (module / n).read_bytes()) for n in ("layernorm_linear.py", "layernorm_mlp.py")]
    for path, source in real + te_files:
        outcome = verify(source, path=path, whole_module=False, cst_reparse=False)
        assert outcome.error is None and not outcome.violations, (path, outcome.violations)


# -- the command line on generated trees --------------------------------------------
@settings(CI, max_examples=8)
@given(st.lists(st.tuples(gg_programs(), st.booleans()), min_size=1, max_size=6), st.data())
def test_cli_fix_leaves_clean_files_byte_identical(tmp_path_factory, files, data):
    """``gradgate fix`` on a tree: files without findings are byte-identical (same inode
    even: never rewritten), the others hold exactly the engine's fixed bytes."""
    import os

    from click.testing import CliRunner

    from gradgate.cli import cli

    root = tmp_path_factory.mktemp("tree")
    expected: dict[Path, tuple[bytes, bool, int]] = {}
    for i, (program, clean) in enumerate(files):
        variant = data.draw(encode_variant(program.text))
        content = variant.data
        if clean:
            content = lint_source("x.py", content, CONFIG, fix=True).fixed or content
        path = root / f"m{i}.py"
        path.write_bytes(content)
        result = lint_source(str(path), content, CONFIG, fix=True)
        changes = result.fixed is not None
        expected[path] = (result.fixed if changes else content, changes, os.stat(path).st_ino)
    result = CliRunner().invoke(cli, ["fix", str(root)])
    # CliRunner turns an exception into exit code 1 too: a crash is not a finding left
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert result.exit_code in (0, 1), result.output
    for path, (content, changes, inode) in expected.items():
        assert path.read_bytes() == content, path.name
        if not changes:
            assert os.stat(path).st_ino == inode, f"{path.name} was rewritten without a change"
        assert lint_source(str(path), content, CONFIG, fix=True).fixed is None  # idempotent
    assert sorted(p.name for p in root.iterdir()) == sorted(p.name for p in expected)


# -- regressions found by the generators (deterministic) ---------------------------------
@pytest.mark.parametrize("data", [
    # both operands are grad mode: the fix keeps one but counts two as fixed
    b"ub_overlap_ag = is_grad_enabled and grad_enabled\n",
    b"import torch\nub_overlap_ag = is_grad_enabled and grad_enabled and torch.is_grad_enabled()\n",
    # the second operand is counted as fixed and reported as left
    b"import torch\nub_overlap_ag = ((x  # why?\n    and torch.is_grad_enabled() and grad_enabled) and y)\n",
], ids=["two-grad-operands", "three-grad-operands", "comment-forces-fallback"])
def test_fixed_findings_are_really_removed(data):
    """``fixed_findings`` (what ``Fixed N findings`` counts) holds only findings whose
    grad-mode operand the fix actually removed."""
    outcome = verify(data, accounting=True)
    _fail_on(outcome, data)


@pytest.mark.parametrize("data", [
    b"\x0cimport torch\nub_overlap_ag = ub_overlap_ag and is_grad_enabled\n",
    b"\xef\xbb\xbf\x0cx = 1\nub_overlap_ag = ub_overlap_ag and is_grad_enabled\n",
], ids=["form-feed-first-line", "bom-form-feed"])
def test_fast_path_and_whole_module_agree(data):
    """lint_source(prefilter=False) promises the same findings and fixes as the fast path."""
    fast = lint_source("t.py", data, CONFIG)
    whole = lint_source("t.py", data, CONFIG, prefilter=False)
    assert fast.error == whole.error
    assert [(f.rule, f.line, f.column) for f in fast.findings] == [(f.rule, f.line, f.column) for f in whole.findings]
    # LibCST drops a leading form feed when it regenerates a whole module, so there the
    # whole-module path must refuse to fix (fixable=False), never rewrite the byte away;
    # the fast path parses only the statement and fixes it byte-exactly.
    fast_fix = lint_source("t.py", data, CONFIG, fix=True)
    whole_fix = lint_source("t.py", data, CONFIG, fix=True, prefilter=False)
    assert fast_fix.fixed == data.replace(b" and is_grad_enabled", b"")
    assert whole_fix.fixed is None and [f.fixable for f in whole_fix.findings] == [False]
