"""Records: classes of named fields, as ``dataclasses`` makes them, at a tenth of the cost.

``@dataclasses.dataclass`` imports ``inspect`` (with ``dis`` and ``tokenize``) and
compiles every method of every class it builds: 0.4-0.9 ms a class, 20-31 ms for the 33
classes a ``check`` of one file imported, about a tenth of that check. :func:`record`
compiles nothing per class: ``__init__`` is one template per shape (the number of fields,
whether some have a factory, whether there is a ``__post_init__``), compiled once and
given the class's field names with ``CodeType.replace``; ``__eq__`` and ``__hash__``
compare the fields through one ``operator.attrgetter``; the rest are shared functions.
About 0.04 ms a class.

It does what gradgate's classes use, the way ``dataclasses`` does it:

* the fields are the class's own annotations, in order (``ClassVar`` ones are not
  fields); a field's default is the value assigned in the class body or
  ``field(default=...)``; ``field(default_factory=...)`` makes a fresh one per instance;
  an unhashable default (a list, dict or set) is refused, as ``dataclasses`` refuses it;
  a field's name may be anything but one starting with ``__record_`` (the template's);
* ``__init__`` takes the fields as arguments, positional or by keyword, and calls
  ``__post_init__`` when the class has one (its own or a base's);
* ``__eq__`` compares the tuples of two instances' fields, of the same class only;
  ``field(compare=False)`` leaves one out (``hash=False``: out of the hash only);
  ``__repr__`` shows the fields (``field(repr=False)`` hides one);
* frozen (the default): assigning or deleting an attribute raises
  :class:`FrozenInstanceError`, and instances hash by their fields; ``record(frozen=False)``
  makes a mutable record, unhashable like a mutable dataclass;
* a method the class body defines is kept, not replaced;
* :func:`replace` and :func:`as_dict` stand for ``dataclasses.replace`` and ``asdict``.

Not supported (refused or not offered): a record inheriting from a record, ``order``,
``slots``, keyword-only fields, ``init=False`` fields. Instances keep a ``__dict__``, so
``functools.cached_property`` works on a frozen record, and they pickle and copy as plain
objects do.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from functools import cache
from operator import attrgetter
from types import CodeType, FunctionType
from typing import TYPE_CHECKING, Any, TypeVar, overload

if TYPE_CHECKING:
    from typing_extensions import dataclass_transform
else:

    def dataclass_transform(**_options: object) -> Callable[[Any], Any]:
        return lambda function: function


T = TypeVar("T")

#: the attribute naming a record's fields, in order
FIELDS = "__record_fields__"


class FrozenInstanceError(AttributeError):
    """An attribute of a frozen record was assigned or deleted."""


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


_MISSING: Any = _Missing()


class Field:
    """What :func:`field` gives: a field's default (or the factory of its default), and
    whether ``repr`` shows it, ``==`` compares it and ``hash`` takes it."""

    __slots__ = ("compare", "default", "default_factory", "hash", "repr")

    def __init__(
        self,
        default: object = _MISSING,
        default_factory: Callable[[], object] | None = None,
        repr: bool = True,
        compare: bool = True,
        hash: bool | None = None,
    ) -> None:
        if default is not _MISSING and default_factory is not None:
            raise ValueError("a field takes a default or a default_factory, not both")
        self.default = default
        self.default_factory = default_factory
        self.repr = repr
        self.compare = compare
        #: None: as compare
        self.hash = compare if hash is None else hash

    @property
    def required(self) -> bool:
        return self.default is _MISSING and self.default_factory is None


@overload
def field(*, default: T, repr: bool = True, compare: bool = True, hash: bool | None = None) -> T: ...
@overload
def field(
    *, default_factory: Callable[[], T], repr: bool = True, compare: bool = True, hash: bool | None = None
) -> T: ...
def field(
    *,
    default: Any = _MISSING,
    default_factory: Callable[[], Any] | None = None,
    repr: bool = True,
    compare: bool = True,
    hash: bool | None = None,
) -> Any:
    """A field with a default (``default``) or a fresh default per instance
    (``default_factory``); ``repr=False`` hides it from ``repr``, ``compare=False`` from
    ``==`` and ``hash``, ``hash=False`` from ``hash`` only."""
    return Field(default, default_factory, repr, compare, hash)


@overload
def record(cls: type[T], /) -> type[T]: ...
@overload
def record(*, frozen: bool = True) -> Callable[[type[T]], type[T]]: ...
@dataclass_transform(frozen_default=True, field_specifiers=(field,))
def record(cls: type[T] | None = None, /, *, frozen: bool = True) -> Any:
    """Make ``cls`` a record (frozen unless ``frozen=False``); see the module's docstring."""

    def make(cls: type[T]) -> type[T]:
        _build(cls, frozen)
        return cls

    return make if cls is None else make(cls)


def replace(obj: T, /, **changes: Any) -> T:
    """A copy of the record ``obj`` with ``changes`` to its fields (``__init__`` runs)."""
    state = obj.__dict__
    for name in getattr(obj, FIELDS):
        if name not in changes:
            changes[name] = state[name]
    return obj.__class__(**changes)


def as_dict(obj: object) -> Any:
    """The record ``obj`` as a dict of its fields, records inside it (also in lists,
    tuples and dicts) as dicts too."""
    names = getattr(obj.__class__, FIELDS, None)
    if names is not None:
        return {name: as_dict(obj.__dict__[name]) for name in names}
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):  # a namedtuple
        return type(obj)(*(as_dict(item) for item in obj))
    if isinstance(obj, (list, tuple)):
        return type(obj)(as_dict(item) for item in obj)
    if isinstance(obj, dict):
        return {as_dict(key): as_dict(value) for key, value in obj.items()}
    return obj


def is_record(obj: object) -> bool:
    """Whether ``obj`` is a record class or an instance of one."""
    return hasattr(obj if isinstance(obj, type) else type(obj), FIELDS)


#: a string annotation naming ClassVar, under any module alias (``tp.ClassVar[int]``)
_CLASS_VARIABLE = re.compile(r"(?:\w+\.)*ClassVar\b")


def _is_class_variable(annotation: object) -> bool:
    if isinstance(annotation, str):
        return _CLASS_VARIABLE.match(annotation) is not None
    import typing

    return annotation is typing.ClassVar or typing.get_origin(annotation) is typing.ClassVar


def _fields(cls: type) -> list[tuple[str, Field]]:
    """Each field of ``cls``: its name and its :class:`Field`."""
    for base in cls.__mro__[1:]:
        if FIELDS in base.__dict__:
            raise TypeError(
                f"record {cls.__qualname__}: inheriting from the record {base.__qualname__} is not supported"
            )
    fields: list[tuple[str, Field]] = []
    # the class's own annotations (inspect.get_annotations would import inspect)
    for name, annotation in cls.__dict__.get("__annotations__", {}).items():  # noqa: RUF063
        if _is_class_variable(annotation):
            continue
        spec = cls.__dict__.get(name, _MISSING)
        if isinstance(spec, Field):
            if spec.default is _MISSING:
                delattr(cls, name)
            else:
                setattr(cls, name, spec.default)
        else:
            spec = Field(default=spec)
        if name.startswith("__record_"):
            raise TypeError(f"record {cls.__qualname__}: field {name}: the prefix __record_ is the records' own")
        if spec.default is not _MISSING and type(spec.default).__hash__ is None:
            raise ValueError(f"record {cls.__qualname__}: mutable default for field {name}: use default_factory")
        if spec.required and fields and not fields[-1][1].required:
            raise TypeError(f"record {cls.__qualname__}: field {name} without a default follows one with a default")
        fields.append((name, spec))
    return fields


def _build(cls: type, frozen: bool) -> None:
    fields = _fields(cls)
    names = tuple(name for name, _ in fields)
    methods: dict[str, Callable[..., Any]] = {
        "__init__": _init(cls, fields),
        "__repr__": _repr(tuple(name for name, spec in fields if spec.repr)),
        "__eq__": _eq(_getter(name for name, spec in fields if spec.compare)),
    }
    own = cls.__dict__
    own_hash = own.get("__hash__", _MISSING)
    #: a __hash__ of the class's own (Python writes None there for a class defining __eq__ only)
    explicit_hash = own_hash is not _MISSING and not (own_hash is None and "__eq__" in own)
    if frozen:
        methods["__setattr__"] = _frozen_setattr
        methods["__delattr__"] = _frozen_delattr
    for name, method in methods.items():
        if name not in own:
            setattr(cls, name, method)
    if not explicit_hash:
        hashed = _getter(name for name, spec in fields if spec.hash)
        cls.__hash__ = _hash(hashed) if frozen else None  # type: ignore[assignment,method-assign]
    setattr(cls, FIELDS, names)
    cls.__match_args__ = names  # type: ignore[attr-defined,misc]


def _getter(names: Iterable[str]) -> Callable[[object], object]:
    """The values of these fields, as a tuple, read in one call."""
    names = tuple(names)
    if not names:
        return _no_fields
    if len(names) == 1:  # attrgetter of one name gives the bare value: a tuple, as dataclasses compare
        one = attrgetter(names[0])
        return lambda record: (one(record),)
    return attrgetter(*names)


def _no_fields(_record: object) -> tuple[()]:
    return ()


def _repr(shown: tuple[str, ...]) -> Callable[[object], str]:
    def __repr__(self: object) -> str:
        state = self.__dict__
        inside = ", ".join(f"{name}={state[name]!r}" for name in shown)
        return f"{type(self).__qualname__}({inside})"

    return __repr__


def _eq(key: Callable[[object], object]) -> Callable[[object, object], bool]:
    def __eq__(self: object, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return key(self) == key(other)

    return __eq__


def _hash(key: Callable[[object], object]) -> Callable[[object], int]:
    def __hash__(self: object) -> int:
        return hash(key(self))

    return __hash__


def _frozen_setattr(self: object, name: str, value: object) -> None:
    raise FrozenInstanceError(f"cannot assign to field {name!r} of a frozen record")


def _frozen_delattr(self: object, name: str) -> None:
    raise FrozenInstanceError(f"cannot delete field {name!r} of a frozen record")


def _init(cls: type, fields: list[tuple[str, Field]]) -> Callable[..., None]:
    """``cls.__init__``: the template of its shape with the fields' names put in."""
    factories = tuple((name, spec.default_factory) for name, spec in fields if spec.default_factory is not None)
    template = _init_template(len(fields), bool(factories), hasattr(cls, "__post_init__"))
    rename = {f"_f{i}": name for i, (name, _) in enumerate(fields)}
    code = template.replace(
        co_varnames=tuple(rename.get(name, name) for name in template.co_varnames),
        co_consts=tuple(rename.get(c, c) if isinstance(c, str) else c for c in template.co_consts),
        co_qualname=f"{cls.__qualname__}.__init__",
    )
    scope = {"__builtins__": __builtins__, "__record_missing": _MISSING, "__record_factories": factories}
    # the fields with a default come last (_fields sees to it); a factory's stands for "not given"
    defaults = tuple(spec.default for _, spec in fields if not spec.required)
    return FunctionType(code, scope, "__init__", defaults or None)


@cache
def _init_template(count: int, factories: bool, post_init: bool) -> CodeType:
    """The code of an ``__init__`` of ``count`` fields named ``_f0``, ``_f1``, ...: one
    compile per shape, where ``dataclasses`` compiles every class's. Its own names start
    with ``__record_`` (a field may not): a field named ``self`` or ``_state`` is a field."""
    parameters = "".join(f", _f{i}" for i in range(count))
    body = [
        "  __record_state = __record_self.__dict__",
        *(f"  __record_state['_f{i}'] = _f{i}" for i in range(count)),
    ]
    if factories:
        body += [
            "  for __record_name, __record_make in __record_factories:",
            "    if __record_state[__record_name] is __record_missing:",
            "      __record_state[__record_name] = __record_make()",
        ]
    if post_init:
        body.append("  __record_self.__post_init__()")
    scope: dict[str, Any] = {}
    exec(f"def __init__(__record_self{parameters}):\n" + "\n".join(body), scope)
    return scope["__init__"].__code__
