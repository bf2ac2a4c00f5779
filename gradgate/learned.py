"""Names a run learns to carry grad mode: the fields and keys its files store it in.

A package often captures grad mode once and hands it on in an object or a dict that
another module reads (``meta.needs_backward = torch.is_grad_enabled()`` in one file,
``if meta.needs_backward:`` in another; ``{"grad": torch.is_grad_enabled()}``, then
``kwargs["grad"]``). The reading module spells no grad-mode source, so neither the
bytes pre-filter nor its own analysis would see grad mode there. A run therefore
scans the bytes of the files that do spell a source for such stores, and the names
found become carriers for the whole run (:meth:`gradgate.config.Config.with_learned`):
pre-filter tokens, and names the interpreter takes as grad mode where nothing in the
module stores them.

A keyword argument of a function (not a class) is no field. Where the call is of a
module object (``self.router(x, grad_on=torch.is_grad_enabled())``), the parameter of
that name of a ``forward`` is learned instead, taken as grad mode where the run does
not see its callers; a method of another object (``self.stats.reduce(...)``) may share
its name with methods of other classes, and teaches nothing.

What counts as a store (one line, the value grad mode itself, or a local holding it; a
negation, ``x.forward_only = not torch.is_grad_enabled()``, is a store of something else):
``x.name = SOURCE``, ``setattr(x, "name", SOURCE)``, ``x["name"] = SOURCE``, a dict
entry ``"name": SOURCE``, and a keyword argument ``name=SOURCE`` (a record's field).
A name that some scanned file also stores something else in is not learned, nor are
the names torch's own objects use for other things (``training``, ``grad``, ...), a
field of one word (``prev``: too common a token to scan every file for), nor a field
that saves grad mode to set it back (``torch.set_grad_enabled(self.prev)``). A property
returning grad mode itself is such a field too.

Two more kinds are learned the same way. A field, keyword of a record, property or
function whose value is an ``and`` of operands one of which is grad mode (``overlap_ag=
module.ub_overlap_ag and grad``, ``return torch.is_grad_enabled() and bool(targets)``) is
*gated* (:attr:`Learned.gated`): read in another module it is grad mode and what else it
holds, and decides there. A decorator whose wrapper fills its ``**kwargs`` with grad
mode (``kwargs.setdefault("training", torch.is_grad_enabled())``) *injects* that
parameter (:attr:`Learned.injected`): grad mode in a function so decorated.

Only bytes are read here: no parsing, nothing imported but the standard library.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from functools import cache

from .records import record

#: names torch's objects hold other things in: never learned as grad mode
_NOT_LEARNED = frozenset({"training", "requires_grad", "grad", "data", "is_leaf", "grad_fn", "enabled", "mode"})


@record
class Learned:
    """What one file's bytes store grad mode in, and the names it stores other things in."""

    fields: frozenset[str] = frozenset()
    keys: frozenset[str] = frozenset()
    #: ``forward.keyword`` of calls of a module object passing grad mode by keyword
    #: (``self.router(x, grad_on=...)``: ``forward.grad_on``): that parameter of a
    #: ``forward``, wherever its callers are not seen
    params: frozenset[str] = frozenset()
    #: fields and keys the file also stores something that is not grad mode in
    other: frozenset[str] = frozenset()
    #: fields the file stores a value *gated* by grad mode in (``overlap_ag=module.ub_overlap_ag
    #: and grad``), and properties and methods returning one: grad off forces them off
    gated: frozenset[str] = frozenset()
    #: ``decorator:parameter`` of decorators whose wrapper fills a keyword argument with
    #: grad mode (``kwargs.setdefault("training", torch.is_grad_enabled())``)
    injected: frozenset[str] = frozenset()

    def __or__(self, other: Learned) -> Learned:
        return Learned(
            self.fields | other.fields,
            self.keys | other.keys,
            self.params | other.params,
            self.other | other.other,
            self.gated | other.gated,
            self.injected | other.injected,
        )

    def names(self) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
        """The fields, keys and parameters learned (less fields and keys also stored
        otherwise), sorted."""
        return (
            tuple(sorted(self.fields - self.other)),
            tuple(sorted(self.keys - self.other)),
            tuple(sorted(self.params)),
        )

    def injected_names(self) -> tuple[str, ...]:
        """The ``decorator:parameter`` pairs learned, sorted."""
        return tuple(sorted(self.injected))

    def gated_names(self) -> tuple[str, ...]:
        """The fields learned to hold a value gated by grad mode (less those also stored
        otherwise, or grad mode itself), sorted."""
        return tuple(sorted(self.gated - self.other - self.fields))

    def encoded(self) -> tuple[str, ...]:
        """As strings, for a cached result (:meth:`decoded` reads them back)."""
        return (
            *(f"f:{n}" for n in sorted(self.fields)),
            *(f"k:{n}" for n in sorted(self.keys)),
            *(f"p:{n}" for n in sorted(self.params)),
            *(f"o:{n}" for n in sorted(self.other)),
            *(f"g:{n}" for n in sorted(self.gated)),
            *(f"i:{n}" for n in sorted(self.injected)),
        )

    @staticmethod
    def decoded(items: Iterable[str]) -> Learned:
        parts: dict[str, set[str]] = {"f": set(), "k": set(), "p": set(), "o": set(), "g": set(), "i": set()}
        for item in items:
            kind, _, name = item.partition(":")
            if kind in parts and name:
                parts[kind].add(name)
        return Learned(*(frozenset(parts[k]) for k in "fkpogi"))


NOTHING = Learned()


@cache
def _patterns(sources: tuple[str, ...]) -> tuple[re.Pattern[bytes], ...]:
    call = rb"(?:[\w.]+\.)?(?:" + b"|".join(re.escape(s.encode()) for s in sources) + rb")\(\s*\)"
    capture = re.compile(rb"^[ \t]*(\w+)[ \t]*(?::[^=\n]*)?=[ \t]*" + call + rb"[ \t]*(?:#[^\n]*)?$", re.M)
    return (
        capture,
        re.compile(call),
        # where a store's value starts (it runs to a top-level `,`, closing bracket or line end)
        re.compile(rb"\.(\w+)[ \t]*=(?!=)[ \t]*"),
        re.compile(rb"setattr\(\s*[\w.]+\s*,\s*['\"](\w+)['\"]\s*,\s*"),
        re.compile(rb"\[\s*['\"](\w+)['\"]\s*\][ \t]*=(?!=)[ \t]*"),
        re.compile(rb"['\"](\w+)['\"]\s*:\s*"),
        re.compile(rb"(?:^|[(,])[ \t]*(\w+)[ \t]*=(?!=)[ \t]*", re.M),
    )


_OPEN, _CLOSE = b"([{", b")]}"
_BRACKETS = re.compile(rb"[()\[\]{}'\"]")
#: a value that is a default, not another meaning (``self.is_train = True`` in ``__init__``)
_CONSTANT = re.compile(rb"True|False|None|-?\d+(\.\d*)?|['\"][^'\"]*['\"]")


def _value(data: bytes, start: int) -> bytes:
    """The expression starting at ``start``: up to a comma or closing bracket outside
    brackets, a comment or the line's end."""
    line_end = data.find(b"\n", start)
    line = data[start : line_end if line_end >= 0 else len(data)]
    if not _BRACKETS.search(line):  # the common case: a plain value to the line's end
        return line.split(b"#", 1)[0].split(b",", 1)[0].strip()
    depth = 0
    at = start
    end = min(len(data), start + _CALL_REACH)
    while at < end:
        byte = data[at : at + 1]
        if byte in (b"\n", b"#") and depth == 0:
            break
        if byte and byte in _OPEN:
            depth += 1
        elif byte and byte in _CLOSE:
            if depth == 0:
                break
            depth -= 1
        elif byte == b"," and depth == 0:
            break
        at += 1
    return data[start:at].strip()


_RESTORED = re.compile(rb"set_grad_enabled\(\s*(?:[\w.]*\.)?(\w+)\s*\)")
#: a local saving a field's value to set it back (`prev = OPTIONS.use_side_stream`)
#: (`prev = _STATE["grad"]` for a key)
_SAVED = re.compile(
    rb"^[ \t]*(\w+)[ \t]*=[ \t]*[A-Za-z_][\w.]*(?:\.(\w+)|\[\s*['\"](\w+)['\"]\s*\])[ \t]*(?:#[^\n]*)?$", re.M
)
#: how far back a keyword's call is looked for (a call's arguments span a few lines)
_CALL_REACH = 4096
_CALLEE = re.compile(rb"([A-Za-z_][\w.]*)\s*$")


def _module_call(callee: str) -> bool:
    """Is ``callee`` spelled as a call of a module object (``self.router(...)``,
    ``router(...)``), which runs its ``forward``, rather than of a method of another
    object (``self.stats.reduce(...)``)?"""
    parts = callee.split(".")
    return (len(parts) == 1 or (len(parts) == 2 and parts[0] == "self")) and parts[-1][:1].islower()


_BRACKET = re.compile(rb"[()\[\]{}]")


def _callee(data: bytes, at: int) -> str:
    """The dotted name of the function called with the keyword argument at ``at`` (""
    when not a call's): a class (``CamelCase``: ``Meta(needs_backward=...)``) takes its
    fields so. The brackets of the :data:`_CALL_REACH` bytes before it are read, from the
    nearest back, for the one left open."""
    depth = 0
    stop = max(0, at - _CALL_REACH)
    for match in reversed(list(_BRACKET.finditer(data, stop, at))):
        byte = match.group()
        if byte in b")]}":
            depth += 1
        elif depth == 0:
            if byte != b"(":
                return ""
            found = _CALLEE.search(data, max(0, match.start() - 200), match.start())
            return found.group(1).decode() if found is not None else ""
        else:
            depth -= 1
    return ""


def learn(data: bytes, sources: Iterable[str]) -> Learned:
    """What ``data`` stores grad mode in; ``sources``: the last names of the grad-mode
    functions (``is_grad_enabled``)."""
    names = tuple(sorted(set(sources)))
    if not names or not any(n.encode() in data for n in names):
        return NOTHING
    capture, call, attribute, setter, item, entry, keyword = _patterns(names)
    encoded = [n.encode() for n in names]
    held = {m.group(1) for m in capture.finditer(data)}
    # `prev = X.field` ... `X.field = prev`: the field set back, not another value stored
    saved = {(m.group(1), (m.group(2) or m.group(3)).decode()) for m in _SAVED.finditer(data)}

    fields: set[str] = set()
    keys: set[str] = set()
    params: set[str] = set()
    other: set[str] = set()
    gated: set[str] = set()
    for pattern, into in ((attribute, fields), (setter, fields), (item, keys), (entry, keys), (keyword, fields)):
        for match in pattern.finditer(data):
            name = match.group(1).decode()
            if (into is fields and name in _NOT_LEARNED) or name.startswith("__"):
                continue  # a quoted key is no attribute of torch's (`flags["grad"]` is not `p.grad`)
            start = match.end()
            line_end = data.find(b"\n", start)
            rest = data[start : line_end if line_end >= 0 else len(data)]
            if any(n in rest for n in encoded) or any(rest.startswith(h) for h in held):
                value = _value(data, start)  # a store of grad mode, maybe: its whole value
            else:  # something else stored: its first token tells a default from another value
                value = rest.split(b"#", 1)[0].strip().rstrip(b",)]}").strip()
            grad = bool(call.fullmatch(value)) or value in held
            is_gated = not grad and into is fields and _gated(value, call, held, encoded)
            if pattern is keyword:
                if not (grad or is_gated):
                    continue  # a keyword of another value says nothing of the field
                callee = _callee(data, match.start(1))
                last = callee.rsplit(".", 1)[-1]
                if not (last == "cls" or (last[:1].isupper() and not last.isupper())):  # a function's argument
                    if grad and _module_call(callee) and "_" in name.strip("_"):  # (a distinct token)
                        params.add(f"forward.{name}")
                    continue
            if grad:
                into.add(name)
            elif is_gated:
                gated.add(name)
            elif pattern is not keyword and not _CONSTANT.fullmatch(value) and (value, name) not in saved:
                # another value stored there (a keyword of another call is not a store
                # of the field, and a constant is a default replaced before use)
                other.add(name)
    # a field that saves grad mode to set it back (`self.prev = torch.is_grad_enabled()`,
    # then `torch.set_grad_enabled(self.prev)`) decides nothing; a one-word field
    # (`prev`) is too common a token for the pre-filter to scan every file for
    restored = {m.group(1).decode() for m in _RESTORED.finditer(data)}
    fields = {f for f in fields if "_" in f.strip("_") and f not in restored}
    # what returns grad mode itself (`def _grad_active(self): return torch.is_grad_enabled()`)
    # is grad mode where this file reads it (`self._grad_active and ...`)
    returning = _returning(data, lambda value: bool(call.fullmatch(value)) or value in held, [*encoded, *held])
    fields |= {name for name in returning if _is_property(data, name)}  # read as a field elsewhere
    carriers = [*encoded, *(f.encode() for f in fields | returning)]
    gated |= _returning(data, lambda value: _gated(value, call, held, carriers), [*carriers, *held])
    gated = {g for g in gated if g not in fields and "_" in g.strip("_")}
    injected = _injected(data, call, held, encoded)
    return Learned(
        frozenset(fields), frozenset(keys), frozenset(params), frozenset(other), frozenset(gated), frozenset(injected)
    )


_FILLED = re.compile(
    rb"^([ \t]*)(?:if [^\n]*:[ \t]*)?(\w+)(?:\.setdefault\(\s*|\[\s*)['\"](\w+)['\"]\s*(?:,|\][ \t]*=(?!=))[ \t]*", re.M
)


def _injected(data: bytes, call: re.Pattern[bytes], held: set[bytes], sources: list[bytes]) -> set[str]:
    """``decorator:parameter`` where a wrapper fills its ``**kwargs`` entry with grad mode
    (``kwargs.setdefault("training", torch.is_grad_enabled())``): the wrapper is the
    nearest ``def`` above taking ``**kwargs``, the decorator the ``def`` enclosing it."""
    found: set[str] = set()
    # the lines that spell grad mode, each tried for a fill at its start (the fill and
    # its value on one line): the few lines worth matching, not every line of the file
    starts = {data.rfind(b"\n", 0, at) + 1 for at in _occurrences(data, [*sources, *held])}
    for start in sorted(starts):
        match = _FILLED.match(data, start)
        if match is None:
            continue
        value = _value(data, match.end())
        if not (call.fullmatch(value) or value in held):
            continue
        receiver, key = match.group(2), match.group(3).decode()
        wrapper = _enclosing_def(data, match.start(), len(match.group(1)))
        if wrapper is None or not re.search(
            rb"\*\*" + re.escape(receiver) + rb"\b", data[wrapper.start() : match.start()]
        ):
            continue
        decorator = _enclosing_def(data, wrapper.start(), len(wrapper.group(1)))
        if decorator is not None:
            found.add(f"{decorator.group(2).decode()}:{key}")
    return found


#: an operator or keyword that makes a value more than an ``and`` of operands
_NOT_A_CONJUNCTION = re.compile(rb"\bor\b|\bif\b|\blambda\b")
_AND = re.compile(rb"\s+and\s+")
_IDENTIFIER = re.compile(rb"[A-Za-z_][\w.]*")
_RETURN = re.compile(rb"^([ \t]*)return[ \t]+", re.M)
_DEF = re.compile(rb"^([ \t]*)(?:async[ \t]+)?def[ \t]+(\w+)", re.M)


def _gated(value: bytes, call: re.Pattern[bytes], held: set[bytes], sources: list[bytes]) -> bool:
    """Is ``value`` an ``and`` of operands one of which is grad mode (a source's call, a
    local holding one, a name spelling a source: TE's ``is_grad_enabled`` parameter; not
    its negation, though other operands may be negated): a value grad off forces off?"""
    if b" and " not in value or _NOT_A_CONJUNCTION.search(value):
        return False
    value = value.strip()
    if value.startswith(b"(") and _closing(value) == len(value) - 1:
        value = value[1:-1]  # `(a and grad)`
    operands = [o.strip() for o in _AND.split(value)]
    return len(operands) > 1 and any(
        call.fullmatch(o) or o in held or (_IDENTIFIER.fullmatch(o) and o.rsplit(b".", 1)[-1] in sources)
        for o in operands
    )


def _is_property(data: bytes, name: str) -> bool:
    """Is some ``def name`` of ``data`` decorated as a property (``@property``,
    ``@functools.cached_property``)?"""
    return bool(re.search(rb"@[\w.]*property[ \t]*\r?\n[ \t]*def[ \t]+" + re.escape(name.encode()) + rb"\b", data))


def _closing(value: bytes) -> int:
    """Where the bracket opening ``value`` closes (-1: nowhere)."""
    depth = 0
    for at, byte in enumerate(value):
        depth += byte in _OPEN
        depth -= byte in _CLOSE
        if depth == 0:
            return at
    return -1


#: how far after a ``return`` (or a keyword fill) its value may spell grad mode: a value
#: of a few lines (the few places worth reading a whole value at)
_VALUE_REACH = 400


def _occurrences(data: bytes, words: Iterable[bytes]) -> list[int]:
    """Where ``data`` spells one of ``words``, in order."""
    return sorted(m.start() for word in set(words) if word for m in re.finditer(re.escape(word), data))


def _enclosing_def(data: bytes, at: int, indent: int) -> re.Match[bytes] | None:
    """The nearest ``def`` above ``at`` indented less than ``indent``: the function whose
    body holds what is there."""
    return next((d for d in reversed(list(_DEF.finditer(data, 0, at))) if len(d.group(1)) < indent), None)


def _near(data: bytes, words: Iterable[bytes]) -> Callable[[int], bool]:
    """Whether a value starting at a position may spell one of ``words`` (one occurs
    within :data:`_VALUE_REACH` bytes after it)."""
    import bisect

    at = _occurrences(data, words)

    def near(start: int) -> bool:
        i = bisect.bisect_left(at, start)
        return i < len(at) and at[i] - start <= _VALUE_REACH

    return near


def _returning(data: bytes, returns: Callable[[bytes], bool], words: Iterable[bytes]) -> set[str]:
    """The functions (properties, methods) with a ``return`` whose value ``returns``
    accepts (``return torch.is_grad_enabled() and bool(self.targets)``): the nearest
    ``def`` above the ``return`` that is indented less. Only returns near one of
    ``words`` (what such a value must spell) are read."""
    found: set[str] = set()
    near = _near(data, words)
    for match in _RETURN.finditer(data):
        if not near(match.end()) or not returns(_value(data, match.end())):
            continue
        definition = _enclosing_def(data, match.start(), len(match.group(1)))
        if definition is not None:
            found.add(definition.group(2).decode())
    return found
