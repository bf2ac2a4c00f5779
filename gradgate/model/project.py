"""The modules of one run, linked: names resolved across files by import and qualified
name, and the effects of a function's parameters followed through any number of calls
into other modules (:mod:`gradgate.model.summary`).

Modules are found as Python would import them, from the *roots* above the top-level
packages of the checked files (so a file checked alone still sees its package), and
read only on demand: when a call passes something that matters (grad mode, or in a
summary, a parameter) to a name of another module. Everything read is remembered for
the run; what each analysis read is recorded, so that its cached result can be
invalidated when one of those files changes (:attr:`Project.parsed` counts the parses).
"""

from __future__ import annotations

import ast
import functools
import io
import os
import re
import tokenize
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

from ..config import Config
from ..records import record, replace
from .bdd import BudgetExceeded, Manager
from .index import FunctionInfo, ModuleIndex, dotted, own_statements, qualify
from .lines import LineIndex, split_lines
from .outline import is_outlined, parse_outline
from .summary import EMPTY, Effect, FunctionSummary, PlaceMaker, compose, summarise
from .types import TypeHints
from .values import GLOBAL, SUPER, FunctionRef, Value

#: how many calls deep a parameter's effects are followed, and how many are kept
MAX_DEPTH = 12
MAX_EFFECTS = 8
#: `obj.attr = function` at the start of a line (a method attached to an object)
_ATTACHED = re.compile(rb"^[ \t]*[A-Za-z_][\w.]*\.(\w+)[ \t]*=[ \t]*([A-Za-z_]\w*)[ \t]*(?:#[^\r\n]*)?\r?$", re.M)
#: more functions attached under one attribute name than this: too common to follow
MAX_ATTACHED = 4


@record(frozen=False)
class ModuleFile:
    """A module the project has read: its name, file and index."""

    name: str
    path: str
    index: ModuleIndex
    hints: TypeHints
    places: PlaceMaker

    @functools.cached_property
    def reads_grad(self) -> bool:
        """Does the module spell a grad-mode token (what the bytes pre-filter looks for)?
        Its own analysis then takes a parameter named as grad mode (``grad_mode``) as
        grad mode; one that spells none is analysed only through its callers, whose
        arguments the parameter then holds."""
        tokens = [t.decode() for t in self.index.config.prefilter_tokens()]
        return any(t in line for line in self.places.lines for t in tokens)

    def mentions_grad(self, info: FunctionInfo) -> bool:
        """Do the lines of ``info`` spell one of the grad-mode tokens?"""
        return any(self.spells(info, t.decode()) for t in self.index.config.prefilter_tokens())

    def spells(self, info: FunctionInfo, word: str) -> bool:
        """Do the lines of ``info`` spell ``word``?"""
        lines = self.places.lines[info.node.lineno - 1 : info.node.end_lineno or info.node.lineno]
        return any(word in line for line in lines)


@record
class Callee:
    """A function a call runs: its module, qualified name in it, and how many leading
    parameters the call does not pass."""

    module: ModuleFile
    qualname: str
    skip: int


def module_name(path: str) -> tuple[str, str, str]:
    """``(module, package, root)`` of a file: ``a/b/c.py`` in packages ``a`` and ``a.b``
    is ``("a.b.c", "a.b", dir above a)``."""
    path = os.path.abspath(path)
    directory, filename = os.path.split(path)
    stem = filename[:-3] if filename.endswith(".py") else filename
    parts = [] if stem == "__init__" else [stem]
    while os.path.isfile(os.path.join(directory, "__init__.py")):
        parent, base = os.path.split(directory)
        if parent == directory or not base.isidentifier():
            break
        parts.insert(0, base)
        directory = parent
    name = ".".join(parts)
    package = name if stem == "__init__" else name.rpartition(".")[0]
    return name, package, directory


#: source bytes (characters) of the modules a project keeps parsed at most
KEEP_BYTES = 4_000_000


class Project:
    def __init__(self, config: Config, paths: Iterable[str] = ()) -> None:
        self.config = config
        self.roots: list[str] = []
        self._packages: list[str] = []
        # in a package, the root and top package depend on the folder only: one walk a folder
        for path in {_root_key(p): p for p in paths}.values():
            self.add_root(path)
        self._found: dict[str, str | None] = {}
        #: what following calls gave up on, as (path, line, what): the engine reports
        #: the ones a file's analysis added as its notices
        self.gave_up: list[tuple[str, int, str]] = []
        self._modules: dict[str, ModuleFile | None] = {}
        self._by_path: dict[str, ModuleFile] = {}
        #: module name -> qualname -> summary
        self._summaries: dict[str, dict[str, FunctionSummary]] = {}
        #: names of the functions whose summary says they return grad mode
        self._returning_here: set[str] = set()
        self._effects: dict[tuple[str, str, str], tuple[tuple[Effect, ...], frozenset[str]]] = {}
        #: the effects each file's text went into, and the answers of returned_grad()
        #: each module gave: what goes with the module when it is dropped
        self._effects_of: dict[str, set[tuple[str, str, str]]] = {}
        self._returned_of: dict[str, set[tuple[str, str | None]]] = {}
        self._attached: dict[str, list[tuple[str, str]]] | None = None
        self._recording: list[set[str]] = []
        #: the parameters whose effects are being followed, and those a cycle reached
        self._open: list[tuple[str, str, str]] = []
        self._returned: dict[tuple[str, str | None], tuple[int, Callee] | None] = {}
        self._returning: set[str] = set()
        self._grad_globals: dict[str, frozenset[str]] = {}
        self._bound_sources: dict[str, dict[str, int]] = {}
        self._declaring: dict[str, bool] = {}
        self._initialised: dict[tuple[str, str], int | None] = {}
        #: the module each remembered :meth:`initialised_grad` answer was read from
        self._initialised_of: dict[str, set[tuple[str, str]]] = {}
        #: the callees :meth:`returned_grad` read (what :meth:`returned_parts` asks again)
        self._returned_callee: dict[tuple[str, str | None], Callee] = {}
        #: files whose bytes say no function of theirs returns grad mode
        self._no_grad_return: set[str] = set()
        #: above 0: only modules whose bytes spell grad mode are read
        self._grad_only = 0
        self._cycled: set[tuple[str, str, str]] = set()
        #: every file the project parsed, in order
        self.parsed: list[str] = []
        #: the parsed modules kept, least recently used first, with their sizes
        self._kept: OrderedDict[str, int] = OrderedDict()
        self._kept_bytes = 0
        #: the module analysed last (registered): never dropped to make room
        self._current: str | None = None
        #: files the run analyses (absolute paths): parsed whole when consulted, so
        #: that their own analysis takes the tree (:meth:`tree_of`)
        self._analysed: frozenset[str] = frozenset()

    # -- where modules are ------------------------------------------------------------
    def add_root(self, path: str) -> None:
        name, _package, root = module_name(path)
        if root not in self.roots:
            self.roots.append(root)
        top = name.split(".")[0]
        package = os.path.join(root, top)
        if top and os.path.isdir(package) and package not in self._packages:
            self._packages.append(package)

    def find_module(self, name: str) -> str | None:
        """The file of the module ``name`` (``a.b``: ``a/b.py`` or ``a/b/__init__.py``
        under a root), or None."""
        return self._find(name)

    def _find(self, name: str) -> str | None:
        if name in self._found:
            return self._found[name]
        found = None
        if name and all(p.isidentifier() for p in name.split(".")):
            relative = name.replace(".", os.sep)
            top = name.split(".", 1)[0]
            # a root that is a namespace package's folder (PEP 420: `megatron/` holds no
            # `__init__.py`, `megatron.core` does) is found from the folder above it too
            roots = [*self.roots, *(os.path.dirname(r) for r in self.roots if os.path.basename(r) == top)]
            for root in roots:
                for candidate in (os.path.join(root, relative + ".py"), os.path.join(root, relative, "__init__.py")):
                    if os.path.isfile(candidate):
                        found = candidate
                        break
                if found:
                    break
        self._found[name] = found
        return found

    def register(self, path: str, tree: ast.Module, index: ModuleIndex, lines: list[str]) -> ModuleFile:
        """The module being analysed, parsed already (not read again)."""
        name = index_name(path)
        known = self._modules.get(name)
        if known is not None and known.places.lines == lines:
            return known  # read already for another file's question: what was found holds
        module = ModuleFile(name, path, index, TypeHints(index, name), PlaceMaker(path, lines))
        if known is not None:  # another version of the text (a fix pass): forget the old
            self.forget(known.path)
        self._modules[name] = module
        self._by_path[os.path.abspath(path)] = module
        self._current = os.path.abspath(path)
        self._keep(self._current, sum(map(len, lines)))
        return module

    def forget(self, path: str) -> None:
        """Drop the module read from ``path`` (a fix pass is done with its text): its tree
        and what was worked out from it."""
        path = os.path.abspath(path)
        module = self._by_path.pop(path, None)
        if path in self._kept:
            self._kept_bytes -= self._kept.pop(path)
        if module is None:
            return
        if self._modules.get(module.name) is module:
            del self._modules[module.name]
        self._summaries.pop(module.name, None)
        for touched in {path, module.path}:  # as the recordings hold it
            for key in self._effects_of.pop(touched, ()):
                self._effects.pop(key, None)
        for asked in self._returned_of.pop(module.name, ()):
            self._returned.pop(asked, None)
            self._returned_callee.pop(asked, None)
        # what was read off the module itself, and the attributes its classes initialise
        for per_module in (self._grad_globals, self._bound_sources, self._declaring):
            per_module.pop(module.name, None)
        for asked in self._initialised_of.pop(module.name, ()):
            self._initialised.pop(asked, None)

    def _keep(self, path: str, size: int) -> None:
        """Count a parsed module in, and drop the least recently used others while the
        modules kept hold more than :data:`KEEP_BYTES` of source: a run that analyses
        every file (``--no-prefilter``) kept every tree (a worker analysing half of
        transformers' 2,912 files: 0.9 GB). A module dropped is parsed again if asked."""
        if path in self._kept:
            self._kept_bytes -= self._kept.pop(path)
        self._kept[path] = size
        self._kept_bytes += size
        while self._kept_bytes > KEEP_BYTES:
            oldest = next((p for p in self._kept if p not in (path, self._current)), None)
            if oldest is None:
                break
            self.forget(oldest)

    def _used(self, module: ModuleFile) -> None:
        path = os.path.abspath(module.path)
        if path in self._kept:
            self._kept.move_to_end(path)

    def expect(self, paths: frozenset[str]) -> None:
        """The files (absolute paths) that the run analyses, this process or another."""
        self._analysed = paths

    def _tree(self, path: str, text: str) -> ast.Module:
        """The tree of a module read to answer a question: whole where the run analyses
        it (its own analysis then takes the tree) and it parses; outlined otherwise (a
        function's body parsed when read; a body that does not parse is `...`)."""
        if os.path.abspath(path) in self._analysed:
            try:
                return ast.parse(text)
            except SyntaxError:
                pass  # its own analysis reports the error; the outline still answers for it
        return parse_outline(text)

    def tree_of(self, path: str, text: str) -> ast.Module | None:
        """The tree of ``path`` if the project parsed it already from this very text, and
        whole (an outline, :func:`~gradgate.model.outline.parse_outline`, may hide a
        body's syntax error: the file's own analysis parses it again)."""
        module = self._by_path.get(os.path.abspath(path))
        if module is None or is_outlined(module.index.tree) or "".join(module.places.lines) != text:
            return None
        return module.index.tree

    def load(self, name: str) -> ModuleFile | None:
        if name in self._modules:
            module = self._modules[name]
            if module is not None:
                self._touch({module.path})
                self._used(module)
            return module
        path = self._find(name)
        module = None
        if path is not None and self._grad_only and path in self._no_grad_return:
            return None
        if path is not None:
            module = self._by_path.get(os.path.abspath(path)) or self._read(name, path)
        if module is None and self._grad_only and path is not None:
            self._no_grad_return.add(path)
            return None  # not read for a grad-mode question; may be for another
        self._modules[name] = module
        if module is not None:
            self._touch({module.path})
        return module

    def _read(self, name: str, path: str) -> ModuleFile | None:
        try:
            with open(path, "rb") as handle:
                data = handle.read()
            if self._grad_only and not may_return_grad(data, self.config.prefilter_tokens()):
                return None
            encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
            text = data.decode(encoding)
            tree = self._tree(path, text)
        except (OSError, SyntaxError, ValueError, UnicodeDecodeError, LookupError, RecursionError, MemoryError):
            return None
        self.parsed.append(path)
        package = name if os.path.basename(path) == "__init__.py" else name.rpartition(".")[0]
        lines = split_lines(text)
        words = LineIndex(text, lines)
        index = ModuleIndex(tree, self.config, words.lines_with, package)
        module = ModuleFile(name, path, index, TypeHints(index, name), PlaceMaker(_shown(path), lines))
        self._by_path[os.path.abspath(path)] = module
        self._keep(os.path.abspath(path), len(text))
        return module

    # -- what files an analysis read --------------------------------------------------
    @contextmanager
    def recording(self) -> Iterator[set[str]]:
        """The paths of the modules consulted inside the ``with`` block."""
        touched: set[str] = set()
        self._recording.append(touched)
        try:
            yield touched
        finally:
            self._recording.pop()

    def _touch(self, paths: Iterable[str]) -> None:
        for recording in self._recording:
            recording.update(paths)

    # -- resolving names --------------------------------------------------------------
    def resolve(self, qualified: str, depth: int = 0) -> tuple[ModuleFile, str, str] | None:
        """``(module, kind, qualname)`` for a fully qualified name: kind ``function``,
        ``class`` or ``module``; re-exports (``from .impl import f`` in a package) are
        followed."""
        parts = qualified.split(".")
        for cut in range(len(parts), 0, -1):
            name = ".".join(parts[:cut])
            if self._find(name) is None and name not in self._modules:
                continue
            module = self.load(name)
            if module is None:
                continue
            rest = ".".join(parts[cut:])
            if not rest:
                return module, "module", ""
            index = module.index
            if rest in index.classes:
                return module, "class", rest
            if rest in index.functions:
                return module, "function", rest
            head, _, tail = rest.partition(".")
            if head in index.aliases and head not in index.classes and depth < 8:
                target = index.aliases[head] + (f".{tail}" if tail else "")
                return self.resolve(target, depth + 1) if target != qualified else None
            if head in index.classes and tail and "." not in tail:
                found = self.method(module, head, tail)
                if found is not None:
                    return found[0], "function", found[1]
            return None
        return None

    def method(
        self, module: ModuleFile, klass: str, name: str, depth: int = 0, bases_only: bool = False
    ) -> tuple[ModuleFile, str] | None:
        """The method ``name`` of class ``klass`` of ``module``, through its bases in
        any module of the project (``bases_only``: as ``super()`` finds it)."""
        info = module.index.classes.get(klass)
        if info is None or depth > 8:
            return None
        if name in info.methods and not bases_only:
            return module, info.methods[name]
        for base in info.bases:
            if base in module.index.classes:
                found = self.method(module, base, name, depth + 1)
            else:
                resolved = self.resolve(base)
                found = (
                    self.method(resolved[0], resolved[2], name, depth + 1)
                    if resolved is not None and resolved[1] == "class"
                    else None
                )
            if found is not None:
                return found
        return None

    def instance_class(self, made_by: str, depth: int = 0) -> tuple[ModuleFile, str] | None:
        """The class of what a call of ``made_by`` returns: the class itself, or what
        the function returns (:meth:`TypeHints.returned`)."""
        resolved = self.resolve(made_by)
        if resolved is None or depth > 4:
            return None
        module, kind, qualname = resolved
        if kind == "class":
            return module, qualname
        if kind == "function":
            returned = module.hints.returned(module.index.functions[qualname])
            return self.instance_class(returned, depth + 1) if returned else None
        return None

    def callee(self, ref: FunctionRef) -> Callee | None:
        """The function a call of ``ref`` (an external or receiver-bound reference) runs."""
        if ref.receiver is not None:
            above = ref.receiver.endswith(SUPER)
            klass = self.instance_class(ref.receiver.removesuffix(SUPER))
            if klass is None:
                return None
            found = self.method(klass[0], klass[1], ref.qualname, bases_only=above)
            if found is None and ref.qualname == "__call__":  # an nn.Module called: its forward
                found = self.method(klass[0], klass[1], "forward")
            if found is None:
                return None
            return Callee(found[0], found[1], 0 if found[0].index.functions[found[1]].static else 1)
        resolved = self.resolve(ref.qualname)
        if resolved is None and ref.qualname.endswith(".apply"):
            # `Fn.apply(...)` of an autograd Function of another module runs its forward
            owner = self.resolve(ref.qualname.removesuffix(".apply"))
            if owner is not None and owner[1] == "class":
                forward = self.method(owner[0], owner[2], "forward")
                if forward is not None:
                    return Callee(forward[0], forward[1], 1)
            return None
        if resolved is None:
            return None
        module, kind, qualname = resolved
        if kind == "function":
            return Callee(module, qualname, ref.skip)
        if kind == "class":
            init = self.method(module, qualname, "__init__")
            return Callee(init[0], init[1], 1) if init is not None else None
        return None

    def record_fields(self, ref: FunctionRef) -> list[str] | None:
        """The declared fields of the class ``ref`` names, when it has no ``__init__`` of
        its own (a dataclass, a NamedTuple): what a call of it fills, in order."""
        if ref.receiver is not None:
            return None
        resolved = self.resolve(ref.qualname)
        if resolved is None or resolved[1] != "class":
            return None
        module, _kind, klass = resolved
        if self.method(module, klass, "__init__") is not None:
            return None
        return module.index.classes[klass].fields

    def attached(self, attr: str) -> list[Callee]:
        """The functions the project attaches to objects as ``obj.attr = function``
        (DeepSpeed's ``param.all_gather_coalesced = all_gather_coalesced``): what a call
        of ``x.attr(...)`` on an object of unknown class may run (at most
        :data:`MAX_ATTACHED`; none where more are attached)."""
        if self._attached is None:
            self._attached = self._scan_attached()
        stores = self._attached.get(attr, [])
        if len(stores) > MAX_ATTACHED:
            return []
        found: list[Callee] = []
        for path, function in stores:
            name, _package, root = module_name(path)
            if root not in self.roots:
                self.roots.append(root)
            module = self.load(name)
            if module is None:
                continue
            for info in module.index.functions.values():
                for statement in own_statements(info.node.body):
                    if (
                        isinstance(statement, ast.Assign)
                        and isinstance(statement.value, ast.Name)
                        and statement.value.id == function
                        and any(isinstance(t, ast.Attribute) and t.attr == attr for t in statement.targets)
                    ):
                        local = f"{info.qualname}.<locals>.{function}"
                        qualname = local if local in module.index.functions else function
                        callee = Callee(module, qualname, 0)
                        if qualname in module.index.functions and callee not in found:
                            found.append(callee)
        return found

    def _scan_attached(self) -> dict[str, list[tuple[str, str]]]:
        stores: dict[str, list[tuple[str, str]]] = {}
        for package in self._packages:
            for directory, dirs, files in os.walk(package):
                dirs[:] = sorted(d for d in dirs if not d.startswith("."))
                for filename in sorted(files):
                    if not filename.endswith(".py"):
                        continue
                    path = os.path.join(directory, filename)
                    try:
                        with open(path, "rb") as handle:
                            data = handle.read()
                    except OSError:
                        continue
                    for match in _ATTACHED.finditer(data):
                        attr, function = match.group(1).decode(), match.group(2).decode()
                        entry = (path, function)
                        if entry not in stores.setdefault(attr, []):
                            stores[attr].append(entry)
        return stores

    def returned_parts(self, ref: FunctionRef) -> tuple[FunctionSummary, Callee] | None:
        """``(summary, callee)`` when the function a call of ``ref`` runs returns a tuple
        or mapping holding grad mode itself (:attr:`FunctionSummary.returns_parts`); the
        same modules and functions are read as for :meth:`returned_grad`."""
        found = self.returned_grad(ref)  # (reads the callee as that does)
        callee = self._returned_callee.get((ref.qualname, ref.receiver))
        if found is not None or callee is None:
            return None
        summary = self.summary(callee.module, callee.qualname)
        return (summary, callee) if summary.returns_parts else None

    def returned_grad(self, ref: FunctionRef) -> tuple[int, Callee] | None:
        """``(polarity, callee)`` when the function a call of ``ref`` runs returns grad
        mode (1) or its negation (-1). Only modules whose bytes could return grad mode
        (:func:`may_return_grad`) are read for this question, and only functions whose
        lines spell it are interpreted."""
        key = (ref.qualname, ref.receiver)
        if key in self._returned:
            return self._returned[key]
        self._returned[key] = None
        self._grad_only += 1
        try:
            callee = self.callee(ref)
        finally:
            self._grad_only -= 1
        found = None
        if callee is None and ref.receiver is None:
            found = self._bound_source(ref.qualname)
        if callee is not None:
            self._returned_of.setdefault(callee.module.name, set()).add(key)
            info = callee.module.index.functions[callee.qualname]
            # (a function relaying another's, `return grad_on()`, spells that one's name)
            module = callee.module
            if (
                module.mentions_grad(info)
                or any(module.spells(info, name) for name in self.grad_returning_names())
                # (a global of its module it spells, stored grad mode in: what the summary
                # of the module's functions storing it says; asked only then)
                or (
                    self._declares_globals(module)
                    and any(module.spells(info, name) for name in module.index.set_globals())
                    and any(module.spells(info, name[len(GLOBAL) :]) for name in self.grad_globals(module))
                )
            ):
                polarity = self.summary(callee.module, callee.qualname).returns_grad
                found = (polarity, callee) if polarity is not None else None
                self._returned_callee[key] = callee
        self._returned[key] = found
        return found

    def initialised_grad(self, made_by: str, attr: str) -> int | None:
        """The polarity of grad mode itself where the class a value of ``made_by`` is of
        (in another module) stores it in ``self.attr`` in its ``__init__``, no method of
        the class storing anything else there; else None (asked at every attribute read
        of such a value: remembered)."""
        key = (made_by, attr)
        if key in self._initialised:
            return self._initialised[key]
        found = self.instance_class(made_by)
        polarity = self._initialised_grad(found[0], found[1], attr) if found is not None else None
        if found is not None:  # (where no class is found, nothing is remembered)
            self._initialised[key] = polarity
            self._initialised_of.setdefault(found[0].name, set()).add(key)
        return polarity

    def _initialised_grad(self, module: ModuleFile, klass: str, attr: str) -> int | None:
        info = module.index.classes.get(klass)
        init = info.methods.get("__init__") if info is not None else None
        if info is None or init is None or init not in module.index.functions:
            return None
        if not module.mentions_grad(module.index.functions[init]):
            return None
        polarity = dict(self.summary(module, init).init_grad).get(attr)
        if polarity is None:
            return None
        for name, method in info.methods.items():  # another store of it: not grad mode alone
            if (
                name != "__init__"
                and method in module.index.functions
                and module.spells(module.index.functions[method], f"self.{attr} =")
            ):
                return None
        return polarity

    def _declares_globals(self, module: ModuleFile) -> bool:
        """Does a line of ``module`` declare a global (``global X``)? Read off its lines
        once, before its functions are walked for them."""
        found = self._declaring.get(module.name)
        if found is None:
            found = self._declaring[module.name] = any(
                line.lstrip().startswith("global ") for line in module.places.lines
            )
        return found

    def grad_globals(self, module: ModuleFile) -> frozenset[str]:
        """The globals of ``module`` (``global:X``) its functions store grad mode itself
        in, and nothing else (``_record_grad_mode`` setting ``_REDISTRIBUTE_ASYNC``, a
        context manager setting one and back): what a getter of the module returning one
        returns (remembered a module)."""
        found = self._grad_globals.get(module.name)
        if found is not None:
            return found
        self._grad_globals[module.name] = frozenset()  # a summary below asking again sees none
        known = set(self._summaries.get(module.name, {}))
        grad: set[str] = set()
        other: set[str] = set()
        index = module.index
        for qualname, info in index.functions.items():
            declared = index.declared_global(qualname)
            if not declared:
                continue  # (a function declaring a global only to read it stores nothing)
            if not module.mentions_grad(info):  # it stores no grad mode: what else, read off
                other |= {GLOBAL + name for name in _stored_otherwise(info.node, declared)}
                continue
            summary = self.summary(module, qualname)
            grad |= summary.stores_grad
            other |= summary.stores_other
        found = self._grad_globals[module.name] = frozenset(grad - other)
        if found:  # the summaries made meanwhile saw none of them: made again when asked
            summaries = self._summaries.get(module.name, {})
            for qualname in set(summaries) - known:
                del summaries[qualname]
        return found

    def _bound_source(self, qualified: str) -> tuple[int, Callee] | None:
        """``(polarity, where)`` when ``qualified`` names a module-level binding of a
        grad-mode source in another module (``grad_mode = torch.is_grad_enabled``): a
        call of it reads grad mode."""
        module_name, _, name = qualified.rpartition(".")
        module = self.load(module_name) if module_name else None
        polarity = self.bound_sources(module).get(name) if module is not None else None
        return (polarity, Callee(module, name, 0)) if polarity is not None and module is not None else None

    def bound_sources(self, module: ModuleFile) -> dict[str, int]:
        """The names ``module`` binds at its top level to a grad-mode source, with its
        polarity (``_grad_enabled = torch.is_grad_enabled``; the first binding of a name;
        remembered a module)."""
        known = self._bound_sources.get(module.name)
        if known is not None:
            return known
        found: dict[str, int] = {}
        self._bound_sources[module.name] = found
        seen: set[str] = set()
        for statement in module.index.tree.body:
            if not (isinstance(statement, ast.Assign) and len(statement.targets) == 1):
                continue
            target, value = statement.targets[0], statement.value
            if isinstance(target, ast.Name) and target.id not in seen:
                seen.add(target.id)
                spelled = dotted(value)
                polarity = self.config.sources.polarity(qualify(spelled, module.index.aliases)) if spelled else None
                if polarity is not None:
                    found[target.id] = polarity
        return found

    def communicates(self, callee: Callee) -> bool:
        """Does the function a call runs communicate in the forward? Its body says, as
        for a function of the module itself (:meth:`ModuleIndex.communicates`: its calls,
        and the functions they run, here or in other modules); it is not interpreted."""
        module = callee.module
        return module.index.communicates(
            callee.qualname, outside=lambda call, info: self.call_communicates(module, call, info)
        )

    def call_communicates(self, module: ModuleFile, call: ast.Call, info: FunctionInfo) -> bool:
        """Does a call in ``info`` of ``module``, unresolved in the module, run a function
        of another module that communicates? (what :meth:`ModuleIndex.communicates` asks of a call it cannot resolve)"""
        ref = reference(call.func, info, module.index.aliases_of(info), module.hints)
        callee = self.callee(ref) if ref is not None else None
        return callee is not None and self.communicates(callee)

    def note_returns(self, names: Iterable[str]) -> None:
        """Names of functions an analysis (here or in a worker) found to return grad mode."""
        self._returning.update(names)

    def grad_returning_names(self) -> set[str]:
        """The names of the functions found so far to return grad mode: words a file
        must spell to call one (the runner's second pre-filter)."""
        return self._returning_here | self._returning

    # -- summaries and effects -----------------------------------------------------------
    def summary(self, module: ModuleFile, qualname: str) -> FunctionSummary:
        known = self._summaries.setdefault(module.name, {})
        found = known.get(qualname)
        if found is not None:
            return found
        info = module.index.functions.get(qualname)
        # a getter of a global its module stores grad mode in returns grad mode (asked only
        # of a function spelling one of the module's set globals; before this summary is
        # begun, so that the module's setters are summarised whole for it)
        reads_globals = (
            info is not None
            and self._declares_globals(module)
            and any(module.spells(info, n) for n in module.index.set_globals())
        )
        globals_ = self.grad_globals(module) if reads_globals else frozenset()
        found = known.get(qualname)  # (made meanwhile, as a setter of them)
        if found is not None:
            return found
        known[qualname] = EMPTY  # a recursive call sees no effects
        summary = EMPTY
        if info is not None:
            from .interpret import Context, grad_function, interpret

            context = Context(module.index, Manager(), project=self, module=module)
            context.summarising = True
            context.attributes = {g: Value(context.bdd.grad) for g in globals_}
            # the module's names bound to a source (`_grad_enabled = torch.is_grad_enabled`)
            for name, polarity in self.bound_sources(module).items():
                context.bound_sources[(None, name)] = grad_function(polarity)
            try:
                result = interpret(context, info)
            except (BudgetExceeded, RecursionError):
                result = None
                self.gave_up.append((module.path, info.node.lineno, f"`{qualname}` not summarised for its callers"))
            if result is not None:
                args = info.node.args
                summary = summarise(
                    result,
                    tuple(a.arg for a in (*args.posonlyargs, *args.args)),
                    frozenset(a.arg for a in args.kwonlyargs),
                    context.bdd,
                    module.places,
                    module.name,
                    info.owner,
                    qualname,
                )
                if info.backward:  # what it returns only: it decides nothing in the forward
                    summary = replace(EMPTY, returns_grad=summary.returns_grad)
        self._summaries.setdefault(module.name, {})[qualname] = summary
        if summary.returns_grad is not None:
            self._returning_here.add(qualname.rsplit(".", 1)[-1])
        return summary

    def parameter(self, callee: Callee, slot: int | str, item: int | str | None = None) -> str | None:
        """The parameter of ``callee`` that a call's argument ``slot`` (its item) binds,
        read from the ``def`` (no interpretation); None where there is none, or where the
        parameter is named as grad mode (the callee takes it as grad mode: its findings
        are its own)."""
        return _parameter(callee.module, callee.qualname, slot, callee.skip, item)

    def effects(self, callee: Callee, slot: int | str, item: int | str | None = None) -> tuple[Effect, ...]:
        """The decisions the argument ``slot`` (its item ``item``) of a call of
        ``callee`` takes part in, in the callee or further down, each with the steps it
        takes there."""
        parameter = self.parameter(callee, slot, item)
        if parameter is None:
            return ()
        return self._parameter_effects(callee.module, callee.qualname, parameter, 0)

    def attribute_effects(self, module: ModuleFile, klass: str, attr: str) -> tuple[Effect, ...]:
        """The decisions the methods of ``klass`` (of ``module``) take ``self.attr`` part
        in, each with the steps it takes there: what storing a value in the attribute of
        such an object decides."""
        return self._parameter_effects(module, f"{klass}#{attr}", f"self.{attr}", 0)

    def _parameter_effects(self, module: ModuleFile, qualname: str, parameter: str, depth: int) -> tuple[Effect, ...]:
        """The effects of one parameter, through the links of its function. Results are
        remembered, except those computed while a function further up the same chain
        was still open (a cycle): they lack what that function adds, and would make the
        answer depend on which file asked first."""
        key = (module.name, qualname, parameter)
        known = self._effects.get(key)
        if known is not None:
            self._touch(known[1])
            return known[0]
        if key in self._open:
            self._cycled.add(key)
            return ()
        self._open.append(key)
        cycled_before = self._cycled
        self._cycled = set()
        try:
            with self.recording() as touched:
                touched.add(module.path)
                effects = self._follow(module, qualname, parameter, depth)
        finally:
            self._open.pop()
            inner, self._cycled = self._cycled, cycled_before
        inner.discard(key)
        if inner:  # part of a cycle opened further up: not remembered
            self._cycled |= inner
        else:
            self._effects[key] = (effects, frozenset(touched))
            for path in touched:
                self._effects_of.setdefault(path, set()).add(key)
        self._touch(touched)
        return effects

    def _follow(self, module: ModuleFile, qualname: str, parameter: str, depth: int) -> tuple[Effect, ...]:
        if "#" in qualname:  # an attribute of a class's objects: what its methods decide with it
            klass, _, attr = qualname.partition("#")
            if not klass:  # a global of the module (`global:X`): what its functions decide with it
                spelled, slot = attr[len(GLOBAL) :], attr
                candidates = list(module.index.functions)
            else:
                info = module.index.classes.get(klass)
                spelled, slot = f"self.{attr}", f"self.{attr}"
                candidates = list(info.methods.values()) if info is not None else []
            methods = sorted(m for m in candidates if module.spells(module.index.functions[m], spelled))
            found = [e for m in methods for e in self._parameter_effects(module, m, slot, depth + 1)]
            return tuple(found[:MAX_EFFECTS])
        summary = self.summary(module, qualname)
        out: list[Effect] = [e for p, e in summary.effects if p == parameter]
        for link in summary.links:
            if link.param != parameter:
                continue
            if depth >= MAX_DEPTH:
                self.gave_up.append((module.path, 0, f"a call chain through `{qualname}` past {MAX_DEPTH} calls"))
                continue
            target = self.load(link.callee[0])
            if target is None:
                continue
            if "#" in link.callee[1]:
                inner: str | None = str(link.slot)
            else:
                inner = _parameter(target, link.callee[1], link.slot, link.skip, link.item)
            if inner is None:
                continue
            step = (
                link.place
                if "#" in link.callee[1]
                else replace(
                    link.place,
                    message=f"`{link.param}` {'passed on as' if link.direct else 'decides the value passed as'} "
                    f"`{inner}` to `{link.callee[1]}`",
                )
            )
            for effect in self._parameter_effects(target, link.callee[1], inner, depth + 1):
                polarity = compose(link.polarity, effect.polarity)
                if polarity == 0 and effect.polarity != 0:
                    continue  # mixed polarity: only a choice's dependence counts
                out.append(Effect(effect.kind, effect.name, polarity, (step, *effect.steps)))
        unique: dict[tuple[object, ...], Effect] = {}
        for effect in out:
            unique.setdefault((effect.kind, effect.name, effect.polarity, effect.steps[-1]), effect)
        return tuple(list(unique.values())[:MAX_EFFECTS])


def _stored_otherwise(function: ast.AST, names: frozenset[str]) -> set[str]:
    """The globals ``names`` that ``function`` stores a value in, other than setting one
    back to what a local saved of it (``prev = X`` ... ``X = prev``)."""
    saved = {
        (s.targets[0].id, s.value.id)
        for s in ast.walk(function)
        if isinstance(s, ast.Assign)
        and len(s.targets) == 1
        and isinstance(s.targets[0], ast.Name)
        and isinstance(s.value, ast.Name)
    }
    stored: set[str] = set()
    for s in ast.walk(function):
        if not isinstance(s, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            continue
        targets = s.targets if isinstance(s, ast.Assign) else [s.target]
        for target in targets:
            if isinstance(target, ast.Name) and target.id in names:
                value = s.value
                if isinstance(value, ast.Name) and (value.id, target.id) in saved:
                    continue  # set back
                stored.add(target.id)
    return stored


def _root_key(path: str) -> str:
    """What :meth:`Project.add_root` learns from ``path`` depends on: its folder, for a
    file of a package; the file itself otherwise."""
    folder = os.path.dirname(os.path.abspath(path))
    return folder if os.path.isfile(os.path.join(folder, "__init__.py")) else os.path.abspath(path)


def _parameter(module: ModuleFile, qualname: str, slot: int | str, skip: int, item: int | str | None) -> str | None:
    """See :meth:`Project.parameter`."""
    info = module.index.functions.get(qualname)
    if info is None:
        return None
    args = info.node.args
    if isinstance(slot, int):
        names = info.positional[skip:]
        name = names[slot] if 0 <= slot < len(names) else None
        if name is None and args.vararg is not None and slot >= len(names):  # into `*args`
            if item is not None:
                return None
            name, item = args.vararg.arg, slot - len(names)
    elif slot.startswith(("self.", "^")):  # the object's attribute; a closure's variable
        name = slot
    else:
        known = slot in info.positional or any(a.arg == slot for a in args.kwonlyargs)
        name = slot if known else None
        if name is None and args.kwarg is not None and item is None:  # into `**kwargs`: its entry
            if module.index.config.sources.is_carrier_name(slot) and module.reads_grad:
                return None
            name, item = args.kwarg.arg, slot
    if name is None or (module.index.config.sources.is_carrier_name(name) and module.reads_grad):
        return None
    if item is None:
        return name
    return f"{name}[{item}]" if isinstance(item, int) else f"{name}.{item}"


def reference(func: ast.expr, info: FunctionInfo, aliases: dict[str, str], hints: TypeHints) -> FunctionRef | None:
    """What a call of ``func`` names in another module, read from its shape alone: an
    imported name (``helper``, ``module.helper``) or a method of an attribute of known
    make (``self.coordinators.get``)."""
    if (
        isinstance(func, ast.Attribute)
        and isinstance(func.value, ast.Attribute)
        and isinstance(func.value.value, ast.Name)
        and func.value.value.id == "self"
    ):
        made = hints.attribute(info.owner, func.value.attr)
        return FunctionRef(func.attr, external=True, receiver=made) if made is not None else None
    name = dotted(func)
    if name is None or name.split(".")[0] not in aliases:
        return None
    return FunctionRef(qualify(name, aliases), external=True)


def may_return_grad(data: bytes, tokens: tuple[bytes, ...]) -> bool:
    """Could a function of this file return grad mode: a ``return`` of a grad-mode token,
    or of a name (``self.name``) assigned from one? A look at the bytes, before parsing:
    at the lines that hold a token only (a handful), not at every line (the patterns
    tried at each of a 90 kB module's lines took 5 ms)."""
    direct, held = _return_patterns(tokens)
    names = set()
    for line in _lines_holding(data, tokens):
        if direct.search(line):
            return True
        assigned = held.match(line)
        if assigned is not None:
            names.add(assigned.group(1))
    return bool(names) and bool(names & {m.group(1) for m in _RETURNED_NAME.finditer(data)})


def _lines_holding(data: bytes, tokens: tuple[bytes, ...]) -> Iterator[bytes]:
    """Each line of ``data`` that holds one of ``tokens``, once (without its newline)."""
    starts: set[int] = set()
    for token in tokens:
        at = data.find(token)
        while at >= 0:
            start = data.rfind(b"\n", 0, at) + 1
            end = data.find(b"\n", at)
            end = len(data) if end < 0 else end
            if start not in starts:
                starts.add(start)
                yield data[start:end]
            at = data.find(token, end)


_RETURNED_NAME = re.compile(rb"\breturn[ \t]+(?:self\.)?(\w+)[ \t]*(?:#[^\n]*)?$", re.M)


@functools.cache
def _return_patterns(tokens: tuple[bytes, ...]) -> tuple[re.Pattern[bytes], re.Pattern[bytes]]:
    spelled = b"|".join(re.escape(t) for t in tokens)
    direct = re.compile(rb"\breturn\b[^\n]*(?:" + spelled + rb")")
    held = re.compile(rb"[ \t]*(?:self\.)?(\w+)[ \t]*(?::[^=\n]*)?=[^=\n][^\n]*(?:" + spelled + rb")")
    return direct, held


def _shown(path: str) -> str:
    """A path as findings show it: relative to the working directory when under it."""
    relative = os.path.relpath(path)
    return path if relative.startswith("..") else relative


def index_name(path: str) -> str:
    """The module name under which a registered module is known."""
    name, _package, _root = module_name(path) if path and not path.startswith("<") else ("", "", "")
    return name or "<module>"
