"""Shared helpers of the reliability suite (``test_properties.py``, ``fuzz.py``).

* :func:`gg_programs`: a hypothesis strategy of small Python modules full of GG001
  material (forward/backward flags, grad-mode operands under aliases, ``and`` chains
  with parentheses, comments, backslashes, suppressions), in every encoding, BOM, line
  ending and indentation style a real tree holds;
* :func:`splice`: plants such a block between the top-level statements of another
  program (a hypothesmith one);
* :func:`mutate_source`: inserts grad-mode operands into the ``and`` chains and
  assignments of real source (TransformerEngine), renaming targets to comm flags;
* :func:`verify`: runs the engine on bytes and returns every property it breaks.
"""

from __future__ import annotations

import ast
import io
import random
import re
import tokenize
import traceback
from dataclasses import dataclass, field

from hypothesis import strategies as st

from gradgate.config import Config
from gradgate.engine import lint_source
from gradgate.model.fixplan import split_lines
from gradgate.source import SourceError, decode_check

CONFIG = Config()

# -- a targeted generator ---------------------------------------------------------
FORWARD_FLAGS = ["ub_overlap_ag", "ub_overlap_rs", "ub_overlap_ag_fprop", "ub_overlap_rs_fprop",
                 "use_all_gather", "reduce_scatter_ok", "self.ub_overlap_ag", "args.overlap_comm"]
OTHER_TARGETS = ["ctx.ub_overlap_ag", "ub_overlap_rs_dgrad", "ub_bulk_wgrad", "fast_path",
                 "backward_needs_input", "x"]
#: grad-mode operands that a GG001 finding is certain for (with ``import torch`` on top)
SURE_GRAD = ["is_grad_enabled", "grad_enabled", "torch.is_grad_enabled()"]
MAYBE_GRAD = ["th.is_grad_enabled()", "grad_on()", "torch._C.is_grad_enabled()", "g",
              "self.is_grad_enabled", "args.grad_enabled", "not is_grad_enabled",
              "not torch.is_inference_mode_enabled()", "torch.is_inference_mode_enabled()",
              "not not is_grad_enabled", "some.is_grad_enabled()", "torch.is_grad_enabled"]
PLAIN = ["x", "not return_layernorm_output", "(a or b)", "f(x)", "y[0]", "(lambda: 1)()",
         "(z if c else w)", "(w := 3)", "1", "'s'", "fp8", "ub_overlap_ag", "a.b.c",
         "not (p and q)", "x < 2", "'é'", "f'{x}'"]
HEADER = [
    "import torch\n",
    "import torch as th\n",
    "from torch import is_grad_enabled as grad_on\n",
]
#: separators usable anywhere / only inside brackets
SEP_BARE = [" and ", "  and  ", " and \\\n        ", " \\\n    and "]
SEP_PAREN = ["\n    and ", " and\n        ", "  # why?\n    and ", " and  # c\n        ",
             "\n\n    and "]


@dataclass
class Program:
    text: str
    #: (line, 1-based column, operand code) the engine must report
    expected: list[tuple[int, int, str]] = field(default_factory=list)


@st.composite
def _statement(draw, indent: str):
    """One assignment statement; returns (text, [(line0, col0, operand)]) where the
    positions are relative to the statement's first character."""
    sure_target = draw(st.booleans())
    target = draw(st.sampled_from(FORWARD_FLAGS if sure_target else FORWARD_FLAGS + OTHER_TARGETS))
    operator = draw(st.sampled_from([" = ", " = ", " = ", ": bool = ", " &= ", " |= "]))
    n = draw(st.integers(1, 5))
    operands = []
    for _ in range(n):
        kind = draw(st.integers(0, 9))
        if kind < 3:
            operands.append((draw(st.sampled_from(SURE_GRAD)), "sure"))
        elif kind < 5:
            operands.append((draw(st.sampled_from(MAYBE_GRAD)), "maybe"))
        else:
            operands.append((draw(st.sampled_from(PLAIN)), "plain"))
    parenthesised = draw(st.booleans())
    seps = SEP_BARE + (SEP_PAREN if parenthesised else [])
    # optional nested and-group (parenthesised) over a sub-range of operands
    group = None
    if n >= 3 and draw(st.booleans()):
        start = draw(st.integers(0, n - 2))
        group = (start, draw(st.integers(start + 1, n - 1)))
    text = f"{target}{operator}" + ("(" if parenthesised else "")
    positions: list[tuple[int, int, str]] = []
    for i, (code, kind) in enumerate(operands):
        if i:
            text += draw(st.sampled_from(seps))
        if group and i == group[0]:
            text += "("
        last_line = text.rsplit("\n", 1)[-1]
        line0 = text.count("\n")
        col0 = len(last_line) + (len(indent) if line0 else 0)
        if kind == "sure":
            positions.append((line0, col0, code))
        text += code
        if group and i == group[1]:
            text += ")"
    if parenthesised:
        text += draw(st.sampled_from([")", "\n)", "  # end\n)"]))
    trailer = draw(st.sampled_from(["", "", "", "  # comment", "  # gradgate: ignore",
                                    "  # gradgate: ignore[GG001]", "  # gradgate: ignore[GG999]",
                                    "; y = 1", "  "]))
    text += trailer
    certain = (
        operator.strip() in ("=", ": bool =")
        and target in FORWARD_FLAGS
        and n >= 2
        and "gradgate: ignore" not in text.replace("ignore[GG999]", "")
    )
    # indent continuation lines
    lines = text.split("\n")
    text = lines[0] + "".join("\n" + (indent + l if l.strip() else l) for l in lines[1:])
    return text, positions if certain else []


@st.composite
def gg_programs(draw) -> Program:
    """A module with a few GG001-relevant statements in various contexts (as text with
    ``\\n`` endings; see :func:`encode_variant` for bytes)."""
    lines: list[str] = list(draw(st.lists(st.sampled_from(HEADER), max_size=3, unique=True)))
    if "import torch\n" not in lines:
        lines.insert(0, "import torch\n")
    expected: list[tuple[int, int, str]] = []
    indent_unit = draw(st.sampled_from(["    ", "  ", "\t", "        "]))
    for _ in range(draw(st.integers(1, 4))):
        context = draw(st.sampled_from(["top", "def", "method", "if", "oneline_if", "else_same_line",
                                        "with", "nested"]))
        if context == "top":
            prefix, indent = [], ""
        elif context == "def":
            prefix, indent = ["def forward(self, x, ub_overlap_ag, is_grad_enabled):\n"], indent_unit
        elif context == "method":
            prefix = ["class M:\n", f"{indent_unit}def forward(self, x):\n",
                      f"{indent_unit * 2}g = torch.is_grad_enabled()\n"]
            indent = indent_unit * 2
        elif context == "if":
            prefix, indent = ["if cond:\n"], indent_unit
        elif context == "with":
            prefix, indent = ["with torch.no_grad():\n"], indent_unit
        elif context == "nested":
            prefix = ["def outer():\n", f"{indent_unit}for i in range(3):\n"]
            indent = indent_unit * 2
        else:
            prefix, indent = [], ""
        statement, positions = draw(_statement(indent))
        if "\\\n" in statement and context in ("oneline_if", "else_same_line"):
            statement = statement.replace("\\\n", " ")
            positions = []
        lines.extend(prefix)
        first_line = len("".join(lines).splitlines()) + 1
        if context == "oneline_if":
            lead = "if cond: "
        elif context == "else_same_line":
            lines.append("if cond: pass\n")
            first_line += 1
            lead = "else: "
        else:
            lead = indent
        if context not in ("oneline_if", "else_same_line") or "\n" not in statement:
            for line0, col0, code in positions:
                expected.append((first_line + line0, (col0 if line0 else col0 + len(lead)) + 1, code))
        lines.append(lead + statement + "\n")
        if draw(st.booleans()):
            lines.append(indent + draw(st.sampled_from(["pass", "return x", "y = ub_overlap_ag", "# tail"])) + "\n")
    text = "".join(lines)
    return Program(text, expected)


@dataclass
class Variant:
    data: bytes
    text: str  # the decoded text the engine sees
    encoding: str
    line_shift: int = 0  # lines added in front of the program (the coding cookie)


@st.composite
def encode_variant(draw, text: str, lone_cr: bool = False) -> Variant:
    """``text`` (``\\n`` endings) as bytes: UTF-8 / UTF-8 BOM / latin-1 cookie, LF /
    CRLF / mixed endings (lone CR too if ``lone_cr``), with or without a final newline."""
    endings = ["\n", "\r\n"] + (["\r"] if lone_cr else [])
    style = draw(st.sampled_from(["lf", "crlf", "mixed"] + (["cr"] if lone_cr else [])))
    parts = text.split("\n")
    if style == "lf":
        text = "\n".join(parts)
    elif style == "crlf":
        text = "\r\n".join(parts)
    elif style == "cr":
        text = "\r".join(parts)
    else:
        out = parts[0]
        for part in parts[1:]:
            # "\r" then "\n" would read as one CRLF ending: never put LF right after CR
            choices = [e for e in endings if not (out.endswith("\r") and e.startswith("\n"))]
            out += draw(st.sampled_from(choices)) + part
        text = out
    tail = draw(st.integers(0, 9))
    if tail == 0:
        text = text.rstrip("\r\n")  # no final newline
    elif tail == 1:  # blank / whitespace-only lines at the end, no final newline
        text += draw(st.sampled_from(["\n ", "\n\n ", endings[-1] + "  " + endings[0] + "\t", "\n\x0c"]))
    encoding = draw(st.sampled_from(["utf-8", "utf-8-sig", "latin-1"]))
    shift = 0
    if encoding == "latin-1":
        try:
            text.encode("latin-1")
        except UnicodeEncodeError:
            encoding = "utf-8"
    if encoding == "latin-1":
        nl = "\r\n" if style == "crlf" else "\n"
        text = f"# -*- coding: latin-1 -*-{nl}# façade: café{nl}" + text
        shift = 2
    return Variant(text.encode(encoding, "surrogatepass"), text, encoding, shift)


# -- splicing into another program ------------------------------------------------
def top_level_offsets(text: str) -> list[int]:
    """Character offsets (start of a line) where a new top-level statement may go."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    starts = [0]
    line_starts = [0]
    for line in split_lines(text):
        line_starts.append(line_starts[-1] + len(line))
    for statement in tree.body:
        first = min([statement.lineno] + [d.lineno for d in getattr(statement, "decorator_list", [])])
        if statement.col_offset == 0 and first - 1 < len(line_starts):
            starts.append(line_starts[first - 1])
    starts.append(len(text))
    return sorted(set(starts))


def splice(host: str, block: str, where: int) -> str:
    """``block`` inserted at the ``where``-th top-level offset of ``host`` if the result
    parses, else appended after it (or ``block`` alone)."""
    offsets = top_level_offsets(host)
    candidates = []
    if offsets:
        at = offsets[where % len(offsets)]
        head = host[:at]
        if head and not head.endswith(("\n", "\r")):
            head += "\n"
        candidates.append(head + block + host[at:])
        candidates.append(host + ("" if host.endswith(("\n", "\r")) or not host else "\n") + block)
    candidates.append(block)
    for candidate in candidates:
        try:
            ast.parse(candidate)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue
        return candidate
    return block


# -- mutating real sources --------------------------------------------------------
GRAD_OPERANDS = ["is_grad_enabled", "torch.is_grad_enabled()", "grad_enabled"]
_SAFE_OPERAND = (ast.Name, ast.Attribute, ast.Call, ast.Subscript, ast.Constant, ast.Compare)


@dataclass
class Mutation:
    kind: str
    line: int  # 1-based line of the inserted operand / renamed target
    detail: str


def _line_starts(data: bytes) -> list[int]:
    starts = [0]
    for line in data.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    return starts


def mutate_source(data: bytes, rng: random.Random, count: int) -> tuple[bytes, list[Mutation]]:
    """Apply ``count`` random grad-mode mutations to UTF-8 source ``data``.

    Kinds: ``append`` (`` and <grad>`` after an operand of an ``and`` chain),
    ``prepend`` (``<grad> and `` before one), ``rename`` (an assignment's target renamed
    to a forward comm flag), ``gate`` (``target = (value) and <grad>`` with the target
    renamed). Offsets are ast byte offsets; edits are applied bottom-up so earlier ones
    stay valid. Mutations whose result does not parse are dropped one by one.
    """
    tree = ast.parse(data)
    starts = _line_starts(data)

    def offset(line: int, col: int) -> int:
        return starts[line - 1] + col

    chains: list[ast.BoolOp] = []
    assigns: list[ast.Assign] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.And):
            chains.append(node)
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            assigns.append(node)
    edits: list[tuple[int, int, bytes, Mutation]] = []  # (start, end, replacement)
    for _ in range(count):
        kind = rng.choice(["append", "prepend", "rename", "gate"])
        grad = rng.choice(GRAD_OPERANDS).encode()
        if kind in ("append", "prepend") and chains:
            chain = rng.choice(chains)
            operand = rng.choice(chain.values)
            if not isinstance(operand, _SAFE_OPERAND) and not (
                isinstance(operand, ast.UnaryOp) and isinstance(operand.op, ast.Not)
            ):
                continue
            if kind == "append":
                at = offset(operand.end_lineno, operand.end_col_offset)
                edits.append((at, at, b" and " + grad, Mutation(kind, operand.end_lineno, grad.decode())))
            else:
                at = offset(operand.lineno, operand.col_offset)
                edits.append((at, at, grad + b" and ", Mutation(kind, operand.lineno, grad.decode())))
        elif kind in ("rename", "gate") and assigns:
            node = rng.choice(assigns)
            target = node.targets[0]
            flag = rng.choice(["ub_overlap_ag", "ub_overlap_rs", "ub_overlap_ag_fprop"]).encode()
            t0, t1 = offset(target.lineno, target.col_offset), offset(target.end_lineno, target.end_col_offset)
            edits.append((t0, t1, flag, Mutation(kind, target.lineno, flag.decode())))
            if kind == "gate":
                v0 = offset(node.value.lineno, node.value.col_offset)
                v1 = offset(node.value.end_lineno, node.value.end_col_offset)
                edits.append((v0, v0, b"(", Mutation(kind, node.value.lineno, "(")))
                edits.append((v1, v1, b") and " + grad, Mutation(kind, node.value.end_lineno, grad.decode())))
    # drop overlapping edits (keep the first drawn), then apply bottom-up
    kept: list[tuple[int, int, bytes, Mutation]] = []
    for edit in edits:
        if all(edit[1] <= k[0] or edit[0] >= k[1] or (edit[0] == edit[1] == k[0] == k[1]) for k in kept):
            if not any(edit[0] == edit[1] == k[0] == k[1] for k in kept):
                kept.append(edit)
    while kept:
        out = data
        for start, end, new, _ in sorted(kept, key=lambda e: (e[0], e[1]), reverse=True):
            out = out[:start] + new + out[end:]
        try:
            ast.parse(out)
            return out, [k[3] for k in kept]
        except SyntaxError:
            kept.pop(rng.randrange(len(kept)))
    return data, []


# -- the properties ---------------------------------------------------------------
def _endings(text: str) -> list[str]:
    return re.findall(r"\r\n|\r|\n", text)


def _is_subsequence(small: bytes, big: bytes) -> bool:
    it = iter(big)
    return all(any(b == c for c in it) for b in small)


def _statement_shape(tree: ast.AST) -> list[str]:
    """Statement kinds and assignment targets, in walk order: what a fix never changes."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.stmt):
            if isinstance(node, ast.Assign):
                out.append("Assign " + " = ".join(ast.unparse(t) for t in node.targets))
            elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
                out.append(f"{type(node).__name__} {ast.unparse(node.target)}")
            else:
                out.append(type(node).__name__)
    return out


def _tokens(text: str) -> list[str]:
    out = []
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type in (tokenize.NAME, tokenize.OP, tokenize.NUMBER, tokenize.STRING):
                out.append(tok.string)
    except (tokenize.TokenError, SyntaxError):
        pass
    return out


def _libcst_whole(data: bytes) -> str:
    """What LibCST makes of the whole file: "exact" (it regenerates every byte),
    "inexact" (it parses, but not byte for byte: e.g. some lone-CR files), "rejects"
    (an error on a file CPython accepts: a final backslash-CRLF, ``(a if b else c)and d``)
    or "other"."""
    import libcst

    try:
        module = libcst.parse_module(data)
    except (libcst.ParserSyntaxError, libcst.CSTValidationError):
        return "rejects"
    except Exception:  # noqa: BLE001  (RecursionError and the like)
        return "other"
    return "exact" if module.bytes == data else "inexact"


def _libcst_rejects_whole(data: bytes) -> bool:
    return _libcst_whole(data) == "rejects"


@dataclass
class Outcome:
    violations: list[str] = field(default_factory=list)
    crashed: bool = False
    findings: int = 0
    fixed: int = 0
    error: str | None = None

    def add(self, kind: str, detail: str = "") -> None:
        self.violations.append(f"{kind}: {detail}" if detail else kind)


def verify(data: bytes, *, path: str = "t.py", whole_module: bool = True,
           cst_reparse: bool = True, accounting: bool = False) -> Outcome:
    """Every reliability property of the engine on ``data``; returns what broke.

    crash, error-format, reparse, encoding, endings, final-newline, statement-shape,
    subsequence, idempotence, stale-fixable, recheck, unchanged-when-clean,
    prefilter-consistency and (opt-in) accounting.
    """
    outcome = Outcome()
    try:
        check = lint_source(path, data, CONFIG)
        fixed = lint_source(path, data, CONFIG, fix=True)
    except Exception:  # noqa: BLE001 - that is the point
        outcome.crashed = True
        outcome.add("crash", traceback.format_exc(limit=6))
        return outcome
    outcome.findings = len(check.findings)
    if check.error is not None or fixed.error is not None:
        outcome.error = check.error or fixed.error
        for err in (check.error, fixed.error):
            if err is not None and (not err.strip() or "\n" in err or "\r" in err):
                outcome.add("error-format", repr(err))
        if fixed.fixed is not None:
            outcome.add("fixed-despite-error", repr(fixed.error))
        if check.error is None and fixed.error is not None:
            outcome.add("fix-error", f"check ok, fix says {fixed.error!r}")
        return outcome
    if whole_module:
        try:
            slow = lint_source(path, data, CONFIG, prefilter=False)
            slow_fix = lint_source(path, data, CONFIG, fix=True, prefilter=False)
        except Exception:  # noqa: BLE001
            outcome.crashed = True
            outcome.add("crash", "prefilter=False: " + traceback.format_exc(limit=6))
            return outcome
        # Same findings at the same places. The whole-module path may refuse a fix the
        # fast path makes (LibCST cannot regenerate some files byte for byte, e.g. a
        # leading form feed): it then reports those findings unfixable and writes
        # nothing; any other difference is a bug.
        def where(findings):
            return [(f.rule, f.line, f.column, f.message) for f in findings]

        if slow.error is not None and check.error is None and _libcst_rejects_whole(data):
            # CPython parses the file, LibCST's tokenizer does not (a final backslash-CRLF):
            # only the whole-module path meets that, and says so (test_bad_inputs pins it)
            pass
        elif check.stage == "prefilter" and check.error is None:
            # no grad-mode token: the fast path reads no further (a syntax error there
            # goes unreported: test_bad_inputs' syntax_error_without_grad_token)
            if slow.findings:
                outcome.add("prefilter-consistency", f"pre-filter skipped a file with findings {slow.findings}")
        elif (
            slow.error is None and check.error is None and not any(f.fixable for f in slow.findings)
            and _libcst_whole(data) == "inexact"
        ):
            # LibCST does not regenerate this file byte for byte, so the whole-module
            # path neither fixes it nor has trustworthy line numbers (LibCST counts a
            # lone CR before a backslash continuation differently from CPython): the
            # same findings, at positions the fast path takes from statements parsed alone
            if [(f.rule, f.message) for f in slow.findings] != [(f.rule, f.message) for f in check.findings]:
                outcome.add("prefilter-consistency", f"{slow.findings} != {check.findings} (inexact whole module)")
        elif slow.error != check.error or where(slow.findings) != where(check.findings):
            outcome.add("prefilter-consistency", f"{slow.error or slow.findings} != {check.error or check.findings}")
        elif any(w.fixable and not f.fixable for w, f in zip(slow.findings, check.findings)):
            outcome.add("prefilter-consistency", "whole-module fixes what the fast path cannot")
        refused = slow_fix.fixed is None and any(not f.fixable for f in slow.findings)
        if slow_fix.error is None and slow_fix.fixed != fixed.fixed and not refused:
            outcome.add("prefilter-consistency", f"fixed {slow_fix.fixed!r} != {fixed.fixed!r}")
    if not any(f.fixable for f in check.findings) and fixed.fixed is not None:
        outcome.add("unchanged-when-clean", "a file without fixable findings was rewritten")
    if fixed.fixed is None:
        if fixed.findings != check.findings:
            outcome.add("recheck", "fix=True reports other findings than check")
        return outcome
    new = fixed.fixed
    outcome.fixed = len(fixed.fixed_findings)
    if new == data:
        outcome.add("no-op-fix", "fixed bytes equal the source")
    encoding = decode_check(data)
    try:
        new_encoding = decode_check(new)
    except SourceError as exc:
        outcome.add("encoding", str(exc))
        return outcome
    if new_encoding != encoding or data.startswith(b"\xef\xbb\xbf") != new.startswith(b"\xef\xbb\xbf"):
        outcome.add("encoding", f"{encoding} -> {new_encoding}")
    text, new_text = data.decode(encoding), new.decode(new_encoding)
    try:
        new_tree = ast.parse(new)
    except (SyntaxError, ValueError) as exc:
        outcome.add("reparse", f"CPython: {exc}")
        return outcome
    if cst_reparse and not _libcst_rejects_whole(data):  # else it cannot read the fix either
        import libcst

        try:
            libcst.parse_module(new)
        except Exception as exc:  # noqa: BLE001
            outcome.add("reparse", f"LibCST: {exc}")
    if _statement_shape(ast.parse(data)) != _statement_shape(new_tree):
        outcome.add("statement-shape", "the fix changed statements or assignment targets")
    old_endings, new_endings = _endings(text), _endings(new_text)
    it = iter(old_endings)
    if not all(any(e == o for o in it) for e in new_endings):
        outcome.add("endings", f"{old_endings[:6]}... -> {new_endings[:6]}...")
    if text.endswith(("\n", "\r")) and not new_text.endswith(("\n", "\r")):
        outcome.add("final-newline", "the fix dropped the file's final line ending")
    if not _is_subsequence(new, data):
        outcome.add("subsequence", "the fix added or changed bytes instead of only removing")
    again = lint_source(path, new, CONFIG, fix=True)
    if again.error is not None:
        outcome.add("idempotence", f"fixed file errors: {again.error}")
    elif again.fixed is not None:
        outcome.add("idempotence", f"a second fix changes it again: {again.fixed!r}")
    recheck = lint_source(path, new, CONFIG)
    if recheck.findings != fixed.findings:
        outcome.add("recheck", f"fixed file reports {recheck.findings} not {fixed.findings}")
    if any(f.fixable for f in fixed.findings):
        outcome.add("stale-fixable", "fixable findings left after fix")
    if accounting:
        removed = list(_tokens(text))
        for tok in _tokens(new_text):
            if tok in removed:
                removed.remove(tok)
        for finding in fixed.fixed_findings:
            code = re.search(r"\(`(.*)`\)", finding.message)
            for tok in _tokens(code.group(1) if code else ""):
                if tok in removed:
                    removed.remove(tok)
                else:
                    outcome.add("accounting", f"fixed finding at {finding.line}:{finding.column} "
                                f"({code.group(1) if code else '?'}) was not removed")
                    break
    return outcome
