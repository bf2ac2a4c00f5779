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
import itertools
import random
import re
import tokenize
import traceback
from dataclasses import dataclass, field

from hypothesis import strategies as st

from gradgate.config import Config
from gradgate.engine import lint_source
from gradgate.model.lines import split_lines
from gradgate.source import SourceError, decode_check

CONFIG = Config()

# -- a targeted generator (detection v2) --------------------------------------------
# Every planted gate sits in a function of its own, on a fresh flag and fresh other
# operands (``gate_<k>`` with parameters ``ub_overlap_ag_<k>``, ``x_<k>``, ...), so
# that what the engine must report follows from v2's semantics without ambiguity: a
# decision that turning grad mode off forces off while grad on leaves it free is one
# finding, at the grad-mode read; its twins (opposite polarity, backward-only target,
# backward function, constant decision, non-flag target, suppressed) are silent.
HEADER = [
    "import torch\n",
    "import torch as th\n",
    "from torch import is_grad_enabled as grad_on\n",
]


@dataclass(frozen=True)
class Read:
    """A grad-mode read: ``pos`` is True while grad is on, ``neg`` while it is off;
    ``text`` is the read the engine reports (inside ``pos`` / ``neg``)."""

    pos: str
    neg: str
    text: str
    needs: str = ""  # a header line, or "param" (a parameter of that name), or "local"


def _reads(k: int, method: bool) -> list[Read]:
    out = [
        Read("torch.is_grad_enabled()", "not torch.is_grad_enabled()", "torch.is_grad_enabled()"),
        Read("torch._C.is_grad_enabled()", "not torch._C.is_grad_enabled()", "torch._C.is_grad_enabled()"),
        Read("th.is_grad_enabled()", "not th.is_grad_enabled()", "th.is_grad_enabled()", HEADER[1]),
        Read("grad_on()", "not grad_on()", "grad_on()", HEADER[2]),
        Read(
            "not torch.is_inference_mode_enabled()",
            "torch.is_inference_mode_enabled()",
            "torch.is_inference_mode_enabled()",
        ),
        Read(f"g_{k}", f"not g_{k}", f"g_{k}", "local"),
        Read("is_grad_enabled", "not is_grad_enabled", "is_grad_enabled", "param"),
        Read("grad_enabled", "not grad_enabled", "grad_enabled", "param"),
    ]
    # (an attribute is grad mode only where the module stores grad mode in it; its
    # spelling alone does not make it one: issue 11, "a later g = cfg.grad_enabled ends it")
    del method
    return out


FLAG_BASES = [
    "ub_overlap_ag",
    "ub_overlap_rs",
    "ub_overlap_ag_fprop",
    "use_all_gather",
    "reduce_scatter_ok",
    "overlap_comm",
]
BACKWARD_BASES = ["ub_overlap_rs_dgrad", "ub_bulk_wgrad", "ub_overlap_ag_bwd", "ctx.ub_overlap_ag"]
#: other operands, ``{k}`` is the gate's number
OTHERS = [
    "x_{k}",
    "not rl_{k}",
    "(a_{k} or b_{k})",
    "f_{k}(x_{k})",
    "y_{k}[0]",
    "cfg_{k}.fp8",
    "x_{k} < 2",
    "(z_{k} if c_{k} else w_{k})",
    "not (p_{k} and q_{k})",
]
SEP_BARE = [" and ", "  and  ", " and \\\n        ", " \\\n    and "]
SEP_PAREN = ["\n    and ", " and\n        ", "  # why?\n    and ", " and  # c\n        ", "\n\n    and "]
#: gate shapes: name -> what the engine must do (fix "safe" or "none" = report only)
POSITIVE = ["chain", "chain", "chain", "augassign", "if_or", "if_not", "if_else", "ifexp", "min", "all", "or"]
SILENT = ["opposite", "opposite_if", "backward_flag", "backward_function", "constant", "not_a_flag", "suppressed"]
#: shapes the engine gets wrong today (self-assignment left): see test_properties' xfail
KNOWN_BAD = ["ifexp_self", "min_self"]


@dataclass(frozen=True)
class Expected:
    line: int
    column: int  # 1-based, in characters
    read: str
    #: "safe": a safe fix must be offered; "none": report only; "any": either
    fix: str
    shape: str


@dataclass
class Program:
    text: str
    #: every finding the engine must report, and no other
    expected: list[Expected] = field(default_factory=list)
    exact: bool = True


def _join(draw, operands: list[str], indent: str) -> tuple[str, bool]:
    """``operands`` as one ``and`` chain: (text, holds a comment)."""
    parenthesised = draw(st.booleans())
    seps = SEP_BARE + (SEP_PAREN if parenthesised else [])
    text = "(" if parenthesised else ""
    n = len(operands)
    group = None
    if n >= 3 and draw(st.booleans()):
        first = draw(st.integers(0, n - 2))
        group = (first, draw(st.integers(first + 1, n - 1)))
    for i, op in enumerate(operands):
        if i:
            text += draw(st.sampled_from(seps))
        if group and i == group[0]:
            text += "("
        text += op
        if group and i == group[1]:
            text += ")"
    if parenthesised:
        text += draw(st.sampled_from([")", "\n)", "  # end\n)"]))
    lines = text.split("\n")
    text = lines[0] + "".join("\n" + (indent + line if line.strip() else line) for line in lines[1:])
    return text, "#" in text


@st.composite
def _gate(draw, k: int, indent: str, method: bool, shape: str):
    """One gate in its function body: (lines of the body, read, params, header, fix)."""
    unit = "    "
    read = draw(st.sampled_from(_reads(k, method)))
    base = draw(st.sampled_from(FLAG_BASES))
    flag = f"{base}_{k}"
    params = [flag] if "." not in flag else []
    other = draw(st.sampled_from(OTHERS)).format(k=k)
    params += sorted(set(re.findall(rf"\b([a-z]+_{k})\b", other)) | {f"x_{k}"})
    if shape == "backward_flag":
        flag = f"{draw(st.sampled_from(BACKWARD_BASES))}_{k}"
        params = [p for p in params if not p.startswith(base)] + ([] if "." in flag else [flag])
        if flag.startswith("ctx."):
            params.insert(0, "ctx")
    body: list[str] = []
    if read.needs == "local":
        body.append(f"{indent}g_{k} = torch.is_grad_enabled()\n")
    fix = "safe"
    comment = False
    chain_shape = shape in ("chain", "backward_flag", "backward_function", "not_a_flag", "suppressed")
    if shape == "not_a_flag":
        flag = f"x_{k}_copy"
        params = [p for p in params if not p.startswith(base)]
    if chain_shape:
        operands = [read.pos, *draw(st.lists(st.sampled_from([flag, other]), min_size=1, max_size=3, unique=True))]
        operands = draw(st.permutations(operands))
        if shape == "suppressed":  # one line: the comment must be on the read's line
            text = " and ".join(operands) + draw(
                st.sampled_from(["  # gradgate: ignore", "  # gradgate: ignore[GG001]"])
            )
        else:
            text, comment = _join(draw, operands, indent)
        statement = f"{indent}{flag}{draw(st.sampled_from([' = ', ' = ', ': bool = ']))}{text}"
        body.append(statement + "\n")
    elif shape == "augassign":
        body.append(f"{indent}{flag} &= {read.pos}\n")
    elif shape == "if_or":
        body.append(f"{indent}if {other} or {read.neg}:\n{indent}{unit}{flag} = False\n")
    elif shape == "if_not":
        body.append(f"{indent}if {read.neg}:\n{indent}{unit}{flag} = False\n")
    elif shape in ("if_else", "if_else_self"):
        kept = other if shape == "if_else" else flag
        body.append(
            f"{indent}if {read.pos}:\n{indent}{unit}{flag} = {kept}\n{indent}else:\n{indent}{unit}{flag} = False\n"
        )
    elif shape in ("ifexp", "ifexp_self"):
        kept = other if shape == "ifexp" else flag
        body.append(f"{indent}{flag} = {kept} if {read.pos} else False\n")
    elif shape in ("min", "min_self"):
        kept = other if shape == "min" else flag
        body.append(f"{indent}{flag} = min({kept}, {read.pos})\n")
    elif shape == "all":
        body.append(f"{indent}{flag} = all([{flag}, {other}, {read.pos}])\n")
    elif shape == "or":
        body.append(f"{indent}{flag} = {flag} or {read.pos}\n")
        fix = "none"
    elif shape == "opposite":
        operands = draw(st.permutations([read.neg, flag, *draw(st.lists(st.just(other), max_size=1))]))
        text, comment = _join(draw, operands, indent)
        body.append(f"{indent}{flag} = {text}\n")
    elif shape == "opposite_if":
        body.append(f"{indent}if {read.pos}:\n{indent}{unit}{flag} = False\n")
    elif shape == "constant":
        body.append(f"{indent}{flag} = {flag} and {read.neg} and {read.pos}\n")
    if comment and fix == "safe":
        fix = "any"  # a comment next to the operand may leave it report-only
    if read.needs == "param":
        params.append(read.text)
    header = read.needs if read.needs.startswith(("import", "from")) else ""
    return body, read, params, header, fix


@st.composite
def gg_programs(draw, known_bad: bool = False) -> Program:
    """A module of a few planted gates and silent twins, each in a function of its own
    (as text with ``\\n`` endings; see :func:`encode_variant` for bytes).

    ``known_bad`` also draws what the engine is known to get wrong today (the shapes of
    :data:`KNOWN_BAD`, a gate alone in its block): ``fuzz.py --known-bad`` looks there."""
    unit = draw(st.sampled_from(["    ", "  ", "\t", "        "]))
    shapes = POSITIVE + SILENT + (KNOWN_BAD if known_bad else [])
    headers: set[str] = {HEADER[0]} | set(draw(st.lists(st.sampled_from(HEADER), max_size=2)))
    chunks: list[tuple[str, str, str | None]] = []  # (text, function name, shape)
    planted: list[tuple[str, Read, str, str]] = []  # (function, read, fix, shape)
    for k in range(draw(st.integers(1, 5))):
        shape = draw(st.sampled_from(shapes))
        context = draw(st.sampled_from(["def", "def", "method", "nested", "block"]))
        name = f"backward_{k}" if shape == "backward_function" else f"gate_{k}"
        if context == "def":
            indent, lead = unit, ""
        elif context == "method":
            indent, lead = unit * 2, f"class Module_{k}:\n"
        elif context == "nested":
            indent, lead = unit * 2, f"def outer_{k}():\n"
        else:
            indent, lead = unit * 2, ""
        body, read, params, header, fix = draw(_gate(k, indent, context == "method", shape))
        if not known_bad or draw(st.booleans()):
            # a statement after the gate: deleting the gate never leaves its block empty
            # (the `pass` the engine writes then is a known bug in CRLF files)
            body.append(f"{indent}done_{k} = True\n")
        if header:
            headers.add(header)
        if context == "method":
            params.insert(0, "self")
        signature = f"def {name}({', '.join(dict.fromkeys(params))}):\n"
        if context == "block":
            body = [f"{unit}{draw(st.sampled_from(['for i in range(3):', 'if c:', 'try:', 'while c:']))}\n", *body]
            if body[0].strip() == "try:":
                body.append(f"{unit}finally:\n{unit * 2}pass\n")
        pad = unit if context in ("method", "nested") else ""
        text = lead + pad + signature + "".join(body)
        text += draw(st.sampled_from(["", f"{pad}{unit}return None\n", f"{pad}{unit}# tail\n", f"{pad}{unit}pass\n"]))
        chunks.append((text, name, shape))
        if shape in POSITIVE or shape in KNOWN_BAD:
            planted.append((name, read, fix, shape))
    text = "".join(h for h in HEADER if h in headers) + "".join(c for c, _, _ in chunks)
    return Program(text, _locate(text, planted))


def _char_column(line: str, byte_column: int) -> int:
    return len(line.encode("utf-8", "surrogatepass")[:byte_column].decode("utf-8", "surrogatepass"))


def _locate(text: str, planted: list[tuple[str, Read, str, str]]) -> list[Expected]:
    """Where each planted read is, found on the parsed program: the read of that text in
    the gate's statement (the last statement of its function but a tail)."""
    tree = ast.parse(text)
    lines = split_lines(text)
    functions = {n.name: n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
    out = []
    for name, read, fix, shape in planted:
        function = functions[name]
        hits = [
            n
            for n in ast.walk(function)
            if isinstance(n, ast.expr)
            and ast.unparse(n) == read.text
            and not (isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store))
            and not isinstance(n, ast.arg)
        ]
        hits = [n for n in hits if not any(n is p.func for p in ast.walk(function) if isinstance(p, ast.Call))]
        if read.needs == "local":
            hits = [n for n in hits if isinstance(n, ast.Name)]
        assert len(hits) == 1, (name, read, [ast.dump(h) for h in hits], text)
        node = hits[0]
        out.append(
            Expected(node.lineno, _char_column(lines[node.lineno - 1], node.col_offset) + 1, read.text, fix, shape)
        )
    return out


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


def _comments(text: str) -> list[str] | None:
    """The COMMENT tokens' strings, in order (None: the text does not tokenize)."""
    try:
        lines = iter(split_lines(text))  # lone CR ends a line too, as CPython reads it
        return [t.string for t in tokenize.generate_tokens(lambda: next(lines, "")) if t.type == tokenize.COMMENT]
    except (tokenize.TokenError, SyntaxError):
        return None


def _libcst_whole(data: bytes) -> str:
    """What LibCST makes of the whole file: "exact", "inexact", "rejects" or "other"."""
    import libcst

    try:
        module = libcst.parse_module(data)
    except (libcst.ParserSyntaxError, libcst.CSTValidationError):
        return "rejects"
    except Exception:  # noqa: BLE001  (RecursionError and the like)
        return "other"
    return "exact" if module.bytes == data else "inexact"


# -- the fix oracle: the same transformation, carried out on the stdlib tree ---------------
class OracleUnsupported(Exception):
    """A fixed read sits where this oracle does not know the simplification."""


def _span_of(node: ast.AST, lines: list[str]) -> tuple[int, int, int, int]:
    return (
        node.lineno,
        _char_column(lines[node.lineno - 1], node.col_offset),
        node.end_lineno,
        _char_column(lines[node.end_lineno - 1], node.end_col_offset),
    )


def _read_nodes(tree: ast.AST, lines: list[str], findings) -> dict[int, tuple[ast.expr, bool]]:
    """id(node) -> (node, its grad-on value) for every finding's read."""
    by_span: dict[tuple[int, int, int, int], ast.expr] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.expr) and hasattr(node, "lineno"):
            by_span.setdefault(_span_of(node, lines), node)  # walk order: the outermost first
    out = {}
    for f in findings:
        node = by_span.get((f.line, f.column - 1, f.end_line, f.end_column - 1))
        if node is None:
            raise OracleUnsupported(f"no expression at the span of {f.line}:{f.column}")
        out[id(node)] = (node, "inference_mode" not in ast.unparse(node))
    return out


def _same(a: ast.AST, b: ast.AST) -> bool:
    dump = lambda n: ast.dump(n, include_attributes=False).replace("ctx=Store()", "ctx=Load()")  # noqa: E731
    return dump(a) == dump(b)


class _Simplify(ast.NodeTransformer):
    """Set each read to its grad-on value and simplify what that makes neutral, exactly
    as issue 11 words the fix: an ``and`` operand now True (``or`` operand now False)
    goes, ``x if <True> else y`` keeps ``x``, ``min``/``max``/``all``/``any`` lose the
    neutral argument, an ``if`` keeps the branch taken, ``flag &= True`` goes, a
    statement left as ``x = x`` goes, a block left empty holds ``pass``."""

    def __init__(self, reads: dict[int, tuple[ast.expr, bool]], lines: list[str]) -> None:
        self.reads = reads
        self.known: set[int] = set()
        self.lines = lines
        self.elifs: set[int] = set()

    def const(self, value: bool) -> ast.Constant:
        node = ast.Constant(value)
        self.known.add(id(node))
        return node

    def is_known(self, node: ast.AST) -> bool:
        return isinstance(node, ast.Constant) and id(node) in self.known

    def visit(self, node):
        if id(node) in self.reads:
            return self.const(self.reads[id(node)][1])
        return super().visit(node)

    def generic_visit(self, node):
        sizes = {
            name: len(getattr(node, name))
            for name in ("body", "orelse", "finalbody")
            if isinstance(getattr(node, name, None), list)
        }
        elif_parent = isinstance(node, ast.If) and len(node.orelse) == 1 and id(node.orelse[0]) in self.elifs
        super().generic_visit(node)
        if not isinstance(node, ast.Module):
            for name, size in sizes.items():
                if size and not getattr(node, name):
                    if name == "orelse" and elif_parent:
                        continue  # an `elif` that goes takes its header with it
                    setattr(node, name, [ast.Pass()])
        return node

    def visit_If(self, node):
        if len(node.orelse) == 1 and isinstance(node.orelse[0], ast.If):
            line = self.lines[node.orelse[0].lineno - 1]
            if line.lstrip().startswith("elif"):
                self.elifs.add(id(node.orelse[0]))
        node = self.generic_visit(node)
        if self.is_known(node.test):
            return node.body if node.test.value else (node.orelse or None)
        return node

    def visit_While(self, node):
        node = self.generic_visit(node)
        if self.is_known(node.test):
            if node.test.value or node.orelse:
                raise OracleUnsupported("while <grad on>")
            return None
        return node

    def visit_AugAssign(self, node):
        node = self.generic_visit(node)
        if self.is_known(node.value):
            neutral = {ast.BitAnd: True, ast.BitOr: False}.get(type(node.op))
            if neutral is None or node.value.value != neutral:
                raise OracleUnsupported("augmented assignment")
            return None
        return node

    def _assignment(self, node, targets):
        touched = any(id(n) in self.reads for n in ast.walk(node.value)) if node.value is not None else False
        node = self.generic_visit(node)
        if touched and len(targets) == 1 and _same(targets[0], node.value):
            return None
        return node

    def visit_Assign(self, node):
        return self._assignment(node, node.targets)

    def visit_AnnAssign(self, node):
        return self._assignment(node, [node.target])

    def visit_UnaryOp(self, node):
        node = self.generic_visit(node)
        if isinstance(node.op, ast.Not) and self.is_known(node.operand):
            return self.const(not node.operand.value)
        return node

    def visit_BoolOp(self, node):
        node = self.generic_visit(node)
        neutral = isinstance(node.op, ast.And)
        kept = [v for v in node.values if not (self.is_known(v) and v.value == neutral)]
        if any(self.is_known(v) for v in kept):
            raise OracleUnsupported("a read that is not neutral in its chain")
        if not kept:
            return self.const(neutral)
        if len(kept) == 1:
            return kept[0]
        node.values = kept
        return node

    def visit_IfExp(self, node):
        node = self.generic_visit(node)
        if self.is_known(node.test):
            return node.body if node.test.value else node.orelse
        return node

    def visit_Compare(self, node):
        node = self.generic_visit(node)
        sides = [node.left, *node.comparators]
        if (
            len(node.ops) == 1
            and any(self.is_known(s) for s in sides)
            and all(isinstance(s, ast.Constant) and isinstance(s.value, bool) for s in sides)
        ):
            a, b = sides[0].value, sides[1].value
            op = type(node.ops[0])
            if op in (ast.Eq, ast.Is):
                return self.const(a == b)
            if op in (ast.NotEq, ast.IsNot):
                return self.const(a != b)
        return node

    def visit_Call(self, node):
        node = self.generic_visit(node)
        name = node.func.id if isinstance(node.func, ast.Name) else None
        if name == "bool" and len(node.args) == 1 and self.is_known(node.args[0]):
            return self.const(node.args[0].value)
        if name in ("min", "max") and not node.keywords:
            neutral = name == "min"
            args = [a for a in node.args if not (self.is_known(a) and a.value == neutral)]
            if len(args) != len(node.args):
                if len(args) == 1:
                    return args[0]
                node.args = args
        if name in ("all", "any") and len(node.args) == 1 and isinstance(node.args[0], (ast.List, ast.Tuple)):
            neutral = name == "all"
            seq = node.args[0]
            seq.elts = [e for e in seq.elts if not (self.is_known(e) and e.value == neutral)]
        return node


def expected_fix(text: str, findings) -> ast.Module:
    """The tree ``text`` must have once the reads of ``findings`` are fixed."""
    tree = ast.parse(text)
    lines = split_lines(text)
    reads = _read_nodes(tree, lines, findings)
    simplify = _Simplify(reads, lines)
    tree = simplify.visit(tree)
    if any(simplify.is_known(n) for n in ast.walk(tree)):
        raise OracleUnsupported("a read left where it has no neutral form")
    return tree


def fixed_regions(text: str, findings) -> list[tuple[int, int]]:
    """Line ranges (1-based, inclusive) of the statements the findings' fixes may change:
    the innermost statement holding each read, an ``elif`` widened to its ``if``; a
    simple statement sharing its line (``if c: x = ...``, ``a = 1; b = 2``) widened to
    the statement that owns the line."""
    tree = ast.parse(text)
    lines = split_lines(text)
    parent: dict[ast.AST, ast.AST] = {}
    for node in ast.walk(tree):
        for child in ast.iter_child_nodes(node):
            parent[child] = node
    spans = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.expr) and hasattr(node, "lineno"):
            spans.setdefault(_span_of(node, lines), node)
    out = []
    for f in findings:
        node = spans.get((f.line, f.column - 1, f.end_line, f.end_column - 1))
        while node is not None and not isinstance(node, ast.stmt):
            node = parent.get(node)
        if node is None:
            continue
        while True:
            up = parent.get(node)
            if (
                isinstance(up, ast.If) and up.orelse == [node] and lines[node.lineno - 1].lstrip().startswith("elif")
            ) or (isinstance(up, ast.stmt) and (up.lineno == node.lineno or _shares_line(up, node))):
                node = up
            else:
                break
        out.append((node.lineno, node.end_lineno))
    out.sort()
    merged: list[tuple[int, int]] = []
    for first, last in out:
        if merged and first <= merged[-1][1] + 0:
            merged[-1] = (merged[-1][0], max(last, merged[-1][1]))
        else:
            merged.append((first, last))
    return merged


def _shares_line(holder: ast.stmt, node: ast.stmt) -> bool:
    """Is ``node`` in a block of ``holder`` that shares a line with another statement
    (``else: x = 1``, ``a = 1; b = 2``)?"""
    for name in ("body", "orelse", "finalbody"):
        block = getattr(holder, name, None)
        if isinstance(block, list) and node in block:
            lines_used = [s.lineno for s in block] + [s.end_lineno for s in block]
            return (
                len(set(s.lineno for s in block)) < len(block)
                or any(a.end_lineno == b.lineno for a, b in itertools.pairwise(block))
                or (name == "orelse" and holder.body and holder.body[-1].end_lineno == node.lineno)
                or (lines_used.count(node.lineno) > 2)
            )
    return False


def outside_unchanged(old: str, new: str, regions: list[tuple[int, int]]) -> bool:
    """Do ``old`` and ``new`` agree outside ``regions`` (line ranges of ``old``), the
    gaps between them kept in order?"""
    lines = split_lines(old)
    gaps, at = [], 1
    for first, last in regions:
        gaps.append("".join(lines[at - 1 : first - 1]))
        at = last + 1
    gaps.append("".join(lines[at - 1 :]))
    if not new.startswith(gaps[0]):
        return False
    pos = len(gaps[0])
    for gap in gaps[1:-1]:
        found = new.find(gap, pos)
        if found < 0:
            return False
        pos = found + len(gap)
    tail = gaps[-1]
    # a file without a final newline: the frame's newline is cut off again
    return len(new) - len(tail) >= pos and new.endswith(tail)


@dataclass
class Outcome:
    violations: list[str] = field(default_factory=list)
    crashed: bool = False
    findings: int = 0
    fixed: int = 0
    error: str | None = None
    #: the fix oracle could not rebuild the fixed tree (only the byte check applied)
    oracle_skipped: int = 0
    oracle_checked: int = 0

    def add(self, kind: str, detail: str = "") -> None:
        self.violations.append(f"{kind}: {detail}" if detail else kind)


def _identity(f) -> tuple:
    """A finding as it survives other statements' fixes: rule, message, line text."""
    return f.rule, f.message.split(" (grad mode also decides")[0], f.source_line.strip()


def _key(f) -> tuple:
    return (f.rule, f.line, f.column, f.end_line, f.end_column, f.message, f.applicability)


def verify(
    data: bytes, *, path: str = "t.py", whole_module: bool = True, cst_reparse: bool = True, accounting: bool = True
) -> Outcome:
    """Every reliability property of the engine on ``data``; returns what broke.

    crash, error-format, fix-error, prefilter-consistency (identical findings and fixes
    with ``prefilter=False``), stage, unchanged-when-clean, recheck, fixable-not-fixed,
    and for each fixed file (safe fixes, then ``unsafe_fixes=True`` when there are
    unsafe ones): no-op-fix, encoding, reparse, endings, final-newline, comments (the
    COMMENT tokens equal), oracle (the fixed tree is the original with the fixed reads
    set to their grad-on value and simplified), outside-bytes (nothing changes outside
    the fixed statements), behaviour (the fixed code, run against a stub torch with grad
    mode on, does what the original did: ``runoracle.py``), idempotence, stale-fixable,
    and accounting (every fixable finding counted as fixed).
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
    if check.stage not in ("prefilter", "ast"):
        outcome.add("stage", f"a check ended at stage {check.stage!r}")
    if whole_module:
        try:
            slow = lint_source(path, data, CONFIG, prefilter=False)
            slow_fix = lint_source(path, data, CONFIG, fix=True, prefilter=False)
        except Exception:  # noqa: BLE001
            outcome.crashed = True
            outcome.add("crash", "prefilter=False: " + traceback.format_exc(limit=6))
            return outcome
        if check.stage == "prefilter":
            # no grad-mode token: the fast path reads no further (a syntax error there
            # goes unreported: test_bad_inputs' syntax_error_without_grad_token)
            if slow.findings:
                outcome.add("prefilter-consistency", f"pre-filter skipped a file with findings {slow.findings}")
        elif slow.error != check.error or [_key(f) for f in slow.findings] != [_key(f) for f in check.findings]:
            outcome.add("prefilter-consistency", f"{slow.error or slow.findings} != {check.error or check.findings}")
        elif slow_fix.error != fixed.error or slow_fix.fixed != fixed.fixed:
            outcome.add(
                "prefilter-consistency", f"fixed {slow_fix.error or slow_fix.fixed!r} != {fixed.error or fixed.fixed!r}"
            )
    _check_fix(outcome, path, data, check, fixed, False, cst_reparse, accounting)
    if any(f.applicability is not None and f.applicability.value == "unsafe" for f in check.findings):
        try:
            unsafe = lint_source(path, data, CONFIG, fix=True, unsafe_fixes=True)
        except Exception:  # noqa: BLE001
            outcome.crashed = True
            outcome.add("crash", "unsafe_fixes=True: " + traceback.format_exc(limit=6))
            return outcome
        if unsafe.error is not None:
            outcome.add("fix-error", f"unsafe fix says {unsafe.error!r}")
        else:
            _check_fix(outcome, path, data, check, unsafe, True, cst_reparse, accounting)
    return outcome


def _check_fix(
    outcome: Outcome, path: str, data: bytes, check, fixed, unsafe: bool, cst_reparse: bool, accounting: bool
) -> None:
    tag = " (unsafe fixes)" if unsafe else ""
    fixable = [f for f in check.findings if f.fixable_with(unsafe)]
    # a fix that an earlier pass's fix made safe (it removed the grad mode that made it
    # unsafe) is applied in the same run, as ruff's fix loop does: it counts as reported
    reported = {_identity(f): f for f in check.findings}
    for done in fixed.fixed_findings:
        earlier = reported.get(_identity(done))
        if earlier is not None and earlier not in fixable:
            fixable.append(earlier)
    if not fixable:
        if fixed.fixed is not None:
            outcome.add("unchanged-when-clean", "a file without fixable findings was rewritten" + tag)
        elif [_key(f) for f in fixed.findings] != [_key(f) for f in check.findings]:
            outcome.add("recheck", "fix=True reports other findings than check" + tag)
        return
    if fixed.fixed is None:
        outcome.add("fixable-not-fixed", f"{len(fixable)} fixable findings, fix changed nothing{tag}")
        return
    new = fixed.fixed
    if not unsafe:
        outcome.fixed = len(fixed.fixed_findings)
    if new == data:
        outcome.add("no-op-fix", "fixed bytes equal the source" + tag)
    encoding = decode_check(data)
    try:
        new_encoding = decode_check(new)
    except SourceError as exc:
        outcome.add("encoding", str(exc))
        return
    if new_encoding != encoding or data.startswith(b"\xef\xbb\xbf") != new.startswith(b"\xef\xbb\xbf"):
        outcome.add("encoding", f"{encoding} -> {new_encoding}")
    text, new_text = data.decode(encoding), new.decode(new_encoding)
    try:
        new_tree = ast.parse(new_text)
    except (SyntaxError, ValueError) as exc:
        outcome.add("reparse", f"CPython: {exc}{tag}")
        return
    if cst_reparse and _libcst_whole(data) in ("exact", "inexact"):  # else it cannot read the fix either
        import libcst

        try:
            libcst.parse_module(new)
        except Exception as exc:  # noqa: BLE001
            outcome.add("reparse", f"LibCST: {exc}")
    old_endings, new_endings = _endings(text), _endings(new_text)
    it = iter(old_endings)
    if not all(any(e == o for o in it) for e in new_endings):
        outcome.add("endings", f"{old_endings[:6]}... -> {new_endings[:6]}...")
    if text.endswith(("\n", "\r")) and not new_text.endswith(("\n", "\r")):
        outcome.add("final-newline", "the fix dropped the file's final line ending")
    old_comments, new_comments = _comments(text), _comments(new_text)
    if old_comments is not None and old_comments != new_comments:
        outcome.add("comments", f"{old_comments} -> {new_comments}{tag}")
    try:
        want = expected_fix(text, fixable)
    except OracleUnsupported:
        outcome.oracle_skipped += 1
    else:
        outcome.oracle_checked += 1
        if ast.dump(want) != ast.dump(new_tree):
            outcome.add(
                "oracle",
                f"the fixed tree is not the original minus the reported reads{tag}:\n"
                f"want {ast.unparse(want)!r}\ngot  {ast.unparse(new_tree)!r}",
            )
    if not outside_unchanged(text, new_text, fixed_regions(text, fixable)):
        outcome.add("outside-bytes", f"bytes outside the fixed statements changed{tag}")
    if not unsafe:  # the run oracle (issue 29): with grad mode on, the fixed code does what the original did
        from runoracle import behaviour_change

        changed = behaviour_change(text, new_text)
        if changed is not None:
            outcome.add("behaviour", changed)
    again = lint_source(path, new, CONFIG, fix=True, unsafe_fixes=unsafe)
    if again.error is not None:
        outcome.add("idempotence", f"fixed file errors: {again.error}{tag}")
    elif again.fixed is not None:
        outcome.add("idempotence", f"a second fix changes it again: {again.fixed!r}{tag}")
    recheck = lint_source(path, new, CONFIG)
    if [_key(f) for f in recheck.findings] != [_key(f) for f in fixed.findings]:
        outcome.add("recheck", f"fixed file reports {recheck.findings} not {fixed.findings}{tag}")
    if any(f.fixable_with(unsafe) for f in recheck.findings):
        outcome.add("stale-fixable", "fixable findings left after fix" + tag)
    if accounting and len(fixed.fixed_findings) != len(fixable):
        outcome.add("accounting", f"{len(fixable)} fixable findings, {len(fixed.fixed_findings)} counted fixed{tag}")
