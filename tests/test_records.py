"""gradgate.records: classes of named fields that behave as dataclasses do, where gradgate
uses them, checked against ``dataclasses`` itself on the same class bodies."""

from __future__ import annotations

import copy
import dataclasses
import pickle
from functools import cached_property
from typing import ClassVar

import pytest

from gradgate.records import FrozenInstanceError, as_dict, field, is_record, record, replace


@record
class Point:
    """A frozen record with a default, a factory and a hidden field."""

    x: int
    y: int = 0
    tags: list[str] = field(default_factory=list)
    note: str = field(default="", repr=False)
    ORIGIN: ClassVar[int] = 0

    @cached_property
    def norm1(self) -> int:
        return abs(self.x) + abs(self.y)


@record
class Other:
    x: int
    y: int = 0
    tags: list[str] = field(default_factory=list)
    note: str = field(default="", repr=False)


@record(frozen=False)
class Box:
    size: int
    inner: Point | None = None
    seen: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.seen.append(self.size)


@record
class Event:
    kind: str
    detail: dict[str, int] = field(default_factory=dict, hash=False)
    info: dict[str, int] = field(default_factory=dict, hash=False, compare=False)


def test_init_defaults_and_factories() -> None:
    p = Point(1)
    assert (p.x, p.y, p.tags, p.note) == (1, 0, [], "")
    assert Point(1).tags is not Point(1).tags
    assert Point(x=2, y=3, tags=["a"], note="n") == Point(2, 3, ["a"], "n")
    assert Point.__record_fields__ == ("x", "y", "tags", "note")  # type: ignore[attr-defined]
    assert Point.__match_args__ == ("x", "y", "tags", "note")
    assert Point.ORIGIN == 0 and Point.y == 0 and "tags" not in Point.__dict__
    with pytest.raises(TypeError, match="missing 1 required positional argument: 'x'"):
        Point()  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="unexpected keyword argument 'z'"):
        Point(1, z=2)  # type: ignore[call-arg]
    assert Point.__init__.__qualname__ == "Point.__init__"


def test_equality_is_per_class_and_field_by_field() -> None:
    assert Point(1, 2) == Point(1, 2)
    assert Point(1, 2) != Point(1, 3)
    assert Point(1, 2) != Other(1, 2)  # same fields, another class: as dataclasses
    assert Point(1, 2) != (1, 2, [], "")
    assert Event("a", {"k": 1}, {"i": 1}) == Event("a", {"k": 1}, {"i": 2})  # compare=False
    assert Event("a", {"k": 1}) != Event("a", {"k": 2})


def test_frozen_records_hash_by_their_fields_and_refuse_changes() -> None:
    a, b = Point(1, 2, note="x"), Point(1, 2, note="x")
    with pytest.raises(TypeError, match="unhashable type: 'list'"):
        hash(a)  # a list field: as a dataclass would
    assert hash(replace(a, tags=())) == hash(replace(b, tags=()))
    assert hash(Event("a", {"k": 1})) == hash(Event("a", {"k": 2}))  # dicts left out of the hash
    with pytest.raises(FrozenInstanceError, match="cannot assign to field 'x'"):
        a.x = 3  # type: ignore[misc]
    with pytest.raises(FrozenInstanceError, match="cannot delete field 'y'"):
        del a.y
    assert isinstance(FrozenInstanceError(), AttributeError)
    assert a.norm1 == 3 and a.norm1 == 3  # a cached_property still works on a frozen record


def test_mutable_records_are_unhashable_and_run_post_init() -> None:
    box = Box(2)
    assert box.seen == [2]
    box.size = 5
    other = Box(9)
    other.size, other.seen = 5, [2]
    assert box == other and box != Box(5)
    with pytest.raises(TypeError, match="unhashable type: 'Box'"):
        hash(box)


def test_repr_replace_and_as_dict() -> None:
    p = Point(1, 2, ["t"], note="hidden")
    assert repr(p) == "Point(x=1, y=2, tags=['t'])"
    q = replace(p, y=5)
    assert q == Point(1, 5, ["t"], "hidden") and p.y == 2
    box = Box(1, inner=p)
    assert as_dict(box) == {"size": 1, "inner": {"x": 1, "y": 2, "tags": ["t"], "note": "hidden"}, "seen": [1]}
    assert as_dict([p, (p,)]) == [as_dict(p), (as_dict(p),)]
    assert replace(box, size=3).seen == [1, 3]  # __init__ (and __post_init__) runs again
    assert is_record(p) and is_record(Point) and not is_record(3)


def test_pickle_and_copy() -> None:
    p = Point(1, 2, ["t"], "n")
    assert pickle.loads(pickle.dumps(p)) == p
    assert copy.deepcopy(Box(1, p)) == Box(1, p)  # no __init__ (nor __post_init__) on a copy
    assert copy.copy(p) == p


def test_same_behaviour_as_dataclasses_on_the_same_body() -> None:
    def body(decorate):
        @decorate
        class Sample:
            a: int
            b: str = "b"
            c: tuple[int, ...] = ()

        return Sample

    ours, theirs = body(record), body(dataclasses.dataclass(frozen=True))
    for args in [(1,), (1, "x"), (1, "x", (2,))]:
        mine, reference = ours(*args), theirs(*args)
        assert repr(mine) == repr(reference)
        assert (mine == ours(*args)) == (reference == theirs(*args))
        assert as_dict(mine) == dataclasses.asdict(reference)


def test_a_class_body_method_is_kept() -> None:
    @record
    class Shown:
        value: int

        def __repr__(self) -> str:
            return f"<{self.value}>"

    assert repr(Shown(3)) == "<3>" and Shown(3) == Shown(3)


def test_what_records_refuse() -> None:
    with pytest.raises(ValueError, match="mutable default for field items: use default_factory"):

        @record
        class Listed:
            items: list[int] = []  # noqa: RUF012

    with pytest.raises(TypeError, match="field b without a default follows one with a default"):

        @record
        class Ordered:
            a: int = 0
            b: int  # type: ignore[misc]

    with pytest.raises(TypeError, match="inheriting from the record Point is not supported"):

        @record
        class Sub(Point):
            z: int = 0

    with pytest.raises(ValueError, match="a default or a default_factory, not both"):
        field(default=1, default_factory=int)  # type: ignore[call-overload]


def test_what_a_review_found_behaves_as_dataclasses():
    """A field named ``self`` (or like the template's names), ``ClassVar`` under an alias,
    one field compared as a 1-tuple, an inherited ``__post_init__``, a namedtuple in
    ``as_dict`` and an unhashable default."""
    import collections
    import typing as tp

    @record
    class Named:
        self: int
        other: int = 2
        _state: int = 3
        SHARED: tp.ClassVar[int] = 1

    assert Named(self=1) == Named(1, 2, 3) and replace(Named(1), other=5).other == 5
    assert Named.__record_fields__ == ("self", "other", "_state")  # type: ignore[attr-defined]

    @record
    class One:
        x: float

    nan = float("nan")
    assert One(nan) == One(nan) and hash(One(1.0)) == hash(One(1.0))  # the identity of the tuple's item

    seen = []

    class Mixin:
        def __post_init__(self) -> None:
            seen.append(self)

    @record
    class Mixed(Mixin):
        a: int

    made = Mixed(1)
    assert seen == [made] and seen[0] is made
    pair = collections.namedtuple("pair", "a b")
    assert as_dict([pair(Point(1), 2)]) == [pair(as_dict(Point(1)), 2)]
    with pytest.raises(ValueError, match="mutable default for field buffer"):

        @record
        class Buffered:
            buffer: bytearray = bytearray()
