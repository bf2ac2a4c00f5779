"""The tree of a module the analysis only consults, the body of each top-level function
and of each method of a top-level class parsed when something first reads it.

A file's cross-module questions (does this callee communicate, what does it return)
parse the modules it calls into, and parsing was most of what they cost: a check of
TransformerEngine's ``layernorm_mlp.py`` parsed six other modules whole (34 ms) to read
a few functions of each. :func:`parse_outline` parses such a module with those bodies
left out (decorators and signatures kept, with their positions); each such function's
node is a :class:`LazyFunctionDef` (or :class:`LazyAsyncFunctionDef`), an
``ast.FunctionDef`` whose ``body`` and ``end_col_offset`` are parsed from the function's
own lines on first read (a method's as the body of a class on the line before it), at
the positions a parse of the whole text gives them; a class whose last statement is one
is a :class:`LazyClassDef`, which ends where that method does. Imports, nested classes
and the module's other statements are parsed at once, as they are.

Where a top-level function ends is read from the text: it runs to the next line that
starts a top-level statement (a method: the next line at the indentation of its class's
first statement; a class whose body is on its header's line or has a line indented with a
tab keeps its methods), found by a scan of the text's strings and comments as
CPython 3.11's tokenizer reads them (a line inside a string, a line a backslash
continues, a line that closes a bracket or goes on with ``else``/``except`` starts
none). A line inside brackets that the scan takes for a start cuts a function short,
and the text that is then left over does not parse: the whole text is parsed instead,
as it is where anything else does not parse, on Pythons whose f-strings may hold their
own quotes (3.12 on), which the scan does not follow, and for a text with lone carriage
returns (line ends the scan does not count), form feeds (after which the tokenizer counts
columns from 0 again: ``\\fdef g():`` starts a statement) or a null byte (which
``ast.parse`` refuses). A backslash before a CRLF line end continues a string as one
before a LF does. A body that does not parse on its own is taken from a parse of the
whole text.

One difference is left: a module whose whole text does not parse because of a function
body is still outlined, and that body, when read, is the outline's ``...``; a whole
parse would have refused the module. Such a tree is never taken for a file's own
analysis (:func:`is_outlined`: the file is parsed whole, and its syntax error reported).
Checked on 9,038 files of six corpora (TransformerEngine, Megatron-LM, DeepSpeed, NeMo,
transformers and the lead corpus) when only top-level functions were outlined, and on the
5,095 files of the first five with methods outlined too (2,093 of them outlined): every
outlined tree, read whole, is the tree ``ast.parse`` gives, positions included.
"""

from __future__ import annotations

import ast
import bisect
import re
import sys
from collections.abc import Iterator
from typing import Any

#: strings (any prefix is an identifier's letters to the scan) and comments, in the
#: order the tokenizer tries them: a quote or a ``#`` outside them starts one. Each body
#: is written as a run of plain characters, then (an escape or a lone quote, then a run)
#: repeated: the same strings as one char or escape at a time, in half the time
_TOKEN = re.compile(
    r"""
      \#[^\n]*
    | \"\"\"[^"\\]*(?:(?:\\(?:\r\n|.)|"(?!""))[^"\\]*)*\"\"\"
    | '''[^'\\]*(?:(?:\\(?:\r\n|.)|'(?!''))[^'\\]*)*'''
    | "[^"\\\n]*(?:\\(?:\r\n|.)[^"\\\n]*)*"
    | '[^'\\\n]*(?:\\(?:\r\n|.)[^'\\\n]*)*'
    """,
    re.S | re.X,
)
#: a line that starts with something other than a space or a comment
_STARTING = re.compile(r"^(?=[^\s#])", re.M)
_FUNCTION = re.compile(r"(?:async[ \t]+)?def[ \t]+(\w+)")
_CLASS = re.compile(r"class[ \t]+\w+")
#: a ``def`` line, at the top level or indented (what :data:`MIN_FUNCTIONS` counts)
_DEFINITION = re.compile(r"^[ \t]*(?:async[ \t]+)?def[ \t]", re.M)
#: the indentation of a line that holds code
_INDENT = re.compile(r"^[ ]+(?=[^\s#])", re.M)
#: a line indented with a tab (the scan matches indentations as they are spelled)
_TAB_INDENT = re.compile(r"^[ ]*\t", re.M)
#: what a ``def``'s header is scanned for, up to the ``:`` that ends it: brackets, that
#: colon, and the starts of comments and strings (a char at a time, long headers took a
#: fifth of the scan)
_HEADER_CHARS = re.compile(r"""[()\[\]{}:#'"]""")
#: lines that go on with the statement before them
_GOES_ON = re.compile(r"(?:else|elif|except|finally)\b|[)\]}]")
#: the scan follows the tokenizer of these Pythons (3.12's f-strings may nest quotes)
SCANNED = sys.version_info < (3, 12)


#: outlining pays from about this many top-level functions on: the scan costs 1-4 ms
#: a module, and a module of classes (``cpu_offload.py``) parsed 30% slower outlined
MIN_FUNCTIONS = 8


def parse_outline(text: str) -> ast.Module:
    """The tree ``ast.parse(text)`` gives (and raises what it raises), the body and end
    column of each top-level function and of each method of a top-level class parsed on
    first read (a text with fewer than :data:`MIN_FUNCTIONS` of them is parsed whole)."""
    if (
        not SCANNED
        or not _defines_at_least(text, MIN_FUNCTIONS)
        or "\0" in text
        or "\f" in text  # the tokenizer's column starts again after one: `\fdef g():` is top-level
        or text.count("\r") != text.count("\r\n")
    ):
        return ast.parse(text)
    outline = _Outline(text)
    functions = outline.functions()
    if not functions:
        return ast.parse(text)
    try:
        tree = ast.parse(outline.skeleton(functions))
    except (SyntaxError, ValueError):
        return ast.parse(text)  # the scan was wrong somewhere (or the text is)
    by_line = {f.header_line: f for f in functions}
    tree.body = _with_lazy_bodies(tree.body, by_line, outline, in_class=False)
    if tree.body is None or by_line:  # a function the scan found is not where the tree has it
        return ast.parse(text)
    setattr(tree, _OUTLINED, True)
    return tree


def _defines_at_least(text: str, count: int) -> bool:
    """Does ``text`` hold ``count`` lines that start a ``def``? (Counted up to ``count``:
    counting them all cost as much as the scan of strings and comments.)"""
    return count <= 0 or any(seen >= count for seen, _ in enumerate(_DEFINITION.finditer(text), 1))


def _with_lazy_bodies(body: list[ast.stmt], by_line: dict[int, _Function], outline: _Outline, in_class: bool) -> Any:
    """``body`` with the functions the scan found (``by_line``, popped) made lazy, the
    methods of its classes too; None where a function found is not the tree's."""
    out: list[ast.stmt] = []
    for statement in body:
        if isinstance(statement, ast.ClassDef) and not in_class:
            methods = _with_lazy_bodies(statement.body, by_line, outline, in_class=True)
            if methods is None:
                return None
            statement.body = methods
            if isinstance(methods[-1], _LazyBody):  # the class ends where that method does
                statement = _ending_with_its_body(statement)
        found = by_line.get(statement.lineno)
        if found is None or not isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef):
            out.append(statement)
        elif statement.name == found.name and found.in_class == in_class:
            del by_line[statement.lineno]
            out.append(_lazy(statement, found, outline))
        else:
            return None
    return out


_OUTLINED = "_gradgate_outlined"


def is_outlined(tree: ast.Module) -> bool:
    """Was ``tree`` made by :func:`parse_outline` with some function bodies left out?"""
    return getattr(tree, _OUTLINED, False)


def body_parsed(node: ast.AST) -> bool:
    """Is the body of ``node`` parsed: a node of a whole tree, or a function of an
    outline whose body was read already (reading it costs nothing more)?"""
    return not isinstance(node, _LazyBody) or "_body" in node.__dict__


_STARTINGS: dict[str, re.Pattern[str]] = {"": _STARTING}


def _starting(indent: str) -> re.Pattern[str]:
    """Lines that start with ``indent`` and then something other than a space or a comment."""
    found = _STARTINGS.get(indent)
    if found is None:
        found = _STARTINGS[indent] = re.compile(f"^{indent}(?=[^\\s#])", re.M)
    return found


class _Function:
    """One function the outline leaves the body of (a top-level function or a method of
    a top-level class): its first line (decorators included), the line of its ``def``,
    its last line of code, and the offset just past its header."""

    __slots__ = ("end_line", "header_end", "header_line", "in_class", "name", "start", "stop")

    def __init__(
        self, name: str, start: int, header_line: int, header_end: int, end_line: int, stop: int, in_class: bool
    ):
        self.name = name
        self.start = start  # offset of its first line
        self.header_line = header_line
        self.header_end = header_end  # offset just past the `:` of the header
        self.end_line = end_line
        self.stop = stop  # offset of the line after its last
        self.in_class = in_class  # a method: its lines are a class body's


class _Outline:
    def __init__(self, text: str) -> None:
        self.text = text
        spans: list[tuple[int, int]] = []  # strings that hold a newline
        comments: list[int] = []
        for match in _TOKEN.finditer(text):
            start, end = match.span()
            if text[start] == "#":
                comments.append(start)
            elif text.find("\n", start, end) >= 0:
                spans.append((start, end))
        self._string_starts = [s for s, _ in spans]
        self._string_ends = [e for _, e in spans]
        self._comments = comments
        self._line_starts = [0, *(m.end() for m in re.finditer("\n", text))]
        self._full: ast.Module | None = None

    def line_of(self, offset: int) -> int:
        return bisect.bisect_right(self._line_starts, offset)

    def in_string(self, offset: int) -> bool:
        at = bisect.bisect_right(self._string_starts, offset) - 1
        return at >= 0 and self._string_starts[at] < offset < self._string_ends[at]

    def _continued(self, offset: int) -> bool:
        """Does a backslash at the end of the line before ``offset`` continue it?"""
        end = offset - 1  # the newline
        if end <= 0:
            return False
        before = end - 1 if self.text[end - 1] != "\r" else end - 2
        if before < 0 or self.text[before] != "\\":
            return False
        at = bisect.bisect_right(self._comments, before) - 1  # a comment's backslash goes on nowhere
        line_start = self._line_starts[self.line_of(before) - 1]
        return not (at >= 0 and self._comments[at] >= line_start)

    def starts(self, indent: str = "", begin: int = 0, end: int | None = None) -> list[int]:
        """Offsets of the lines from ``begin`` to ``end`` that start a statement at
        ``indent`` (a decorator's line for a decorated definition): the top-level
        statements, by default."""
        found: list[int] = []
        text = self.text
        decorated = False
        for match in _starting(indent).finditer(text, begin, len(text) if end is None else end):
            at, code = match.start(), match.end()
            if self.in_string(code) or self._continued(at) or _GOES_ON.match(text, code):
                continue
            if text.startswith("@", code):
                if not decorated:
                    found.append(at)
                decorated = True
                continue
            if not decorated:
                found.append(at)
            decorated = False
        return found

    def functions(self) -> list[_Function]:
        """The top-level functions, and the methods of the top-level classes."""
        starts = self.starts()
        functions = []
        for k, start in enumerate(starts):
            stop = starts[k + 1] if k + 1 < len(starts) else len(self.text)
            found = self._function(start, stop, "")
            if found is not None:
                functions.append(found)
            else:
                functions.extend(self._methods(start, stop))
        return functions

    def _function(self, start: int, stop: int, indent: str) -> _Function | None:
        """The function whose lines (at ``indent``) run from ``start`` to ``stop``, or None."""
        header = self._header(start, stop, indent)
        if header is None:
            return None
        name, header_line, header_end = header
        end_line = self._last_code_line(header_end, stop)
        if end_line is None:
            return None
        return _Function(name, start, header_line, header_end, end_line, stop, bool(indent))

    def _methods(self, start: int, stop: int) -> list[_Function]:
        """The methods of the class whose lines run from ``start`` to ``stop`` (none
        where they are not a class's, its body is on its header's line, or a line of it
        is indented with a tab)."""
        text = self.text
        at = self._past_decorators(start, stop, "")
        if at is None or _CLASS.match(text, at) is None:
            return []
        colon = self._header_colon(at, stop)
        if colon is None:
            return []
        first = text.find("\n", colon)
        if first < 0 or first >= stop or text[colon + 1 : first].split("#")[0].strip():
            return []  # `class A: pass`, or a header line a backslash continues
        indent = _INDENT.search(text, first + 1, stop)
        if indent is None or self.in_string(indent.start()) or _TAB_INDENT.search(text, first + 1, stop):
            return []
        spaces = indent.group()
        starts = self.starts(spaces, indent.start(), stop)
        methods = []
        for k, method_start in enumerate(starts):
            method_stop = starts[k + 1] if k + 1 < len(starts) else stop
            found = self._function(method_start, method_stop, spaces)
            if found is not None:
                methods.append(found)
        return methods

    def _past_decorators(self, start: int, stop: int, indent: str) -> int | None:
        """The offset of the first line from ``start`` on that is not a decorator's."""
        text = self.text
        at = start + len(indent)
        while text.startswith("@", at):  # the decorators: to the first line at the indent that is not one
            following = [m for m in _starting(indent).finditer(text, at + 1, stop) if not self.in_string(m.end())]
            following = [m for m in following if not self._continued(m.start()) and not _GOES_ON.match(text, m.end())]
            if not following:
                return None
            at = following[0].end()
        return at

    def _header(self, start: int, stop: int, indent: str) -> tuple[str, int, int] | None:
        """The name, ``def`` line and end of the header of the function whose lines run
        from ``start`` to ``stop``, or None where they are not a function's."""
        at = self._past_decorators(start, stop, indent)
        if at is None:
            return None
        found = _FUNCTION.match(self.text, at)
        if found is None:
            return None
        colon = self._header_colon(found.end(), stop)
        if colon is None:
            return None
        return found.group(1), self.line_of(at), colon + 1

    def _header_colon(self, offset: int, stop: int) -> int | None:
        """The ``:`` that ends a ``def``'s header: the first outside brackets, strings
        and comments after its name."""
        text = self.text
        depth = 0
        at = offset
        while (found := _HEADER_CHARS.search(text, at, stop)) is not None:  # the next char that counts
            at = found.start()
            char = text[at]
            if char in "([{":
                depth += 1
            elif char in ")]}":
                depth -= 1
            elif char == ":":
                if depth == 0:
                    return at
            else:  # a comment or a string: past it
                token = _TOKEN.match(text, at)
                if token is None:
                    return None
                at = token.end()
                continue
            at += 1
        return None

    def _last_code_line(self, offset: int, stop: int) -> int | None:
        """The last line from ``offset`` to ``stop`` that holds code (not blank, not only
        a comment; any line of a string counts), where the function's body ends."""
        first = self.line_of(offset)
        for line in range(self.line_of(max(offset, stop - 1)), first - 1, -1):
            begin = self._line_starts[line - 1]
            end = self._line_starts[line] if line < len(self._line_starts) else len(self.text)
            piece = self.text[max(begin, offset) : min(end, stop)].strip()
            if (piece and not piece.startswith("#")) or self.in_string(begin):
                return line
        return None

    def skeleton(self, functions: list[_Function]) -> str:
        """The text with each function's body left out: its header ends in ``...`` and
        its other lines are blank, so that every other statement keeps its lines."""
        pieces = []
        at = 0
        for function in functions:
            pieces.append(self.text[at : function.header_end])
            pieces.append(" ...")
            body = self.text[function.header_end : function.stop]
            pieces.append("\n" * body.count("\n"))
            at = function.stop
        pieces.append(self.text[at:])
        return "".join(pieces)

    def full(self) -> ast.Module:
        if self._full is None:
            self._full = ast.parse(self.text)
        return self._full


def _lazy(node: ast.FunctionDef | ast.AsyncFunctionDef, function: _Function, outline: _Outline) -> ast.stmt:
    kind = LazyAsyncFunctionDef if isinstance(node, ast.AsyncFunctionDef) else LazyFunctionDef
    lazy = kind()  # type: ignore[call-arg]  # (its fields are set below, as ast allows)
    for name in node._fields:
        if name != "body":
            setattr(lazy, name, getattr(node, name))
    for name in ("lineno", "col_offset"):
        setattr(lazy, name, getattr(node, name))
    lazy.end_lineno = function.end_line
    state = lazy.__dict__
    state["_outline"], state["_function"], state["_skeleton"] = outline, function, node.body
    state["_header_end_col"] = node.end_col_offset
    return lazy


def _definitions(body: list[ast.stmt], in_class: bool) -> Iterator[ast.FunctionDef | ast.AsyncFunctionDef]:
    """The functions of a module's top level (``in_class``: of its top-level classes)."""
    for statement in body:
        if in_class and isinstance(statement, ast.ClassDef):
            yield from _definitions(statement.body, False)
        elif not in_class and isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef):
            yield statement


class _LazyBody:
    """The ``body`` and ``end_col_offset`` of a top-level function, parsed on first read
    from its own lines (preceded by as many blank lines as come before them, so that the
    positions are the whole text's)."""

    __dict__: dict[str, Any]

    def _materialise(self) -> None:
        state = self.__dict__
        outline: _Outline = state.pop("_outline")
        function: _Function = state.pop("_function")
        skeleton: list[ast.stmt] = state.pop("_skeleton")
        line = outline.line_of(function.start)
        # a method's lines are parsed as the body of a class on the line before them
        header = "\n" * (line - 2) + "class _:\n" if function.in_class else "\n" * (line - 1)
        real = None
        try:
            parsed = ast.parse(header + outline.text[function.start : function.stop]).body
            if function.in_class and len(parsed) == 1 and isinstance(parsed[0], ast.ClassDef):
                parsed = parsed[0].body
            if len(parsed) == 1 and type(parsed[0]).__name__ in (type(self).__name__[4:], type(self).__name__):
                real = parsed[0]
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            pass
        if real is None or real.lineno != state.get("lineno") or real.end_lineno != state.get("end_lineno"):
            # its lines alone do not make the function: take it from the whole text
            try:
                whole = outline.full()
            except (SyntaxError, ValueError, RecursionError, MemoryError):
                # the text does not parse (this body, most likely): the outline's `...`
                state["_body"], state["_end_col_offset"] = skeleton, state.get("_header_end_col")
                return
            real = next(s for s in _definitions(whole.body, function.in_class) if s.lineno == state.get("lineno"))
            state["end_lineno"] = real.end_lineno
        assert isinstance(real, ast.FunctionDef | ast.AsyncFunctionDef)
        state["_body"], state["_end_col_offset"] = real.body, real.end_col_offset

    @property
    def body(self) -> list[ast.stmt]:
        if "_body" not in self.__dict__:
            self._materialise()
        return self.__dict__["_body"]

    @body.setter
    def body(self, value: list[ast.stmt]) -> None:
        self.__dict__.pop("_outline", None)
        self.__dict__.pop("_function", None)
        self.__dict__["_body"] = value

    @property
    def end_col_offset(self) -> int | None:
        if "_body" not in self.__dict__:
            self._materialise()
        return self.__dict__["_end_col_offset"]

    @end_col_offset.setter
    def end_col_offset(self, value: int | None) -> None:
        if "_body" not in self.__dict__:
            self._materialise()
        self.__dict__["_end_col_offset"] = value


class _FromLastStatement:
    """A position attribute (``end_lineno``, ``end_col_offset``) of a class that is its
    last statement's until it is set: asked, that method's body is parsed only for
    ``end_col_offset``."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name, self.key = name, f"_{name}"

    def __get__(self, node: Any, owner: type | None = None) -> Any:
        if node is None:
            return self
        state = node.__dict__
        return state[self.key] if self.key in state else getattr(node.body[-1], self.name)

    def __set__(self, node: Any, value: int | None) -> None:
        node.__dict__[self.key] = value


class LazyClassDef(ast.ClassDef):
    """A top-level class whose last statement is a method the outline left the body of:
    it ends where that method does (read from the method when asked)."""

    end_lineno = _FromLastStatement()
    end_col_offset = _FromLastStatement()


def _ending_with_its_body(node: ast.ClassDef) -> LazyClassDef:
    lazy = LazyClassDef()  # type: ignore[call-arg]  # (its fields are set below, as ast allows)
    for name in (*node._fields, "lineno", "col_offset"):
        setattr(lazy, name, getattr(node, name))
    return lazy


class LazyFunctionDef(_LazyBody, ast.FunctionDef):
    """A top-level ``def`` whose body is parsed on first read (:class:`_LazyBody`)."""


class LazyAsyncFunctionDef(_LazyBody, ast.AsyncFunctionDef):
    """A top-level ``async def`` whose body is parsed on first read (:class:`_LazyBody`)."""
