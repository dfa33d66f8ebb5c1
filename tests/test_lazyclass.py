"""lazy_dataclass behaves as dataclass() does, and compiles its methods only when first used."""

from __future__ import annotations

import copy
import dataclasses
import pickle
import subprocess
import sys
from dataclasses import dataclass, field
from typing import Any

import pytest

from trainmedic.lazyclass import lazy_dataclass


def _is_stub(cls: type, name: str) -> bool:
    return getattr(cls.__dict__.get(name), "__lazy_stub__", False)


def make_types(deco: Any) -> dict[str, type]:
    """The same record types, built by `dataclass` or by `lazy_dataclass`."""

    @deco(frozen=True)
    class Point:
        x: int
        tags: tuple[str, ...] = field(default_factory=tuple)

    @deco(kw_only=True, eq=False, repr=False)
    class Base:
        t: float = 1.0
        note: str = field(default="", repr=False)

        def __post_init__(self) -> None:
            self.seen = True

    @deco(kw_only=True, eq=False, repr=False)
    class Child(Base):
        step: int
        extra: list[int] = field(default_factory=list)

    @deco
    class Mutable:
        a: int
        b: str = "b"
        hidden: int = field(default=0, init=False, compare=False)

    @deco(order=True, frozen=True)
    class Ordered:
        a: int

    @deco(frozen=True)
    class FrozenChild(Point):
        y: int = 2

    @deco(unsafe_hash=True)
    class Hashed:
        a: int

    @deco(frozen=True, slots=True)
    class Slotted:
        code: str
        count: int = 0

    @deco(slots=True)
    class SlottedMutable:
        a: int

    return {
        c.__name__: c
        for c in (Point, Base, Child, Mutable, Ordered, FrozenChild, Hashed, Slotted, SlottedMutable)
    }


PLAIN = make_types(dataclass)
LAZY = make_types(lazy_dataclass)


def behaviour(types: dict[str, type]) -> list[object]:
    """Everything observable about the types, as plain values (errors as their messages)."""
    Point, Child, Mutable = types["Point"], types["Child"], types["Mutable"]
    Ordered, FrozenChild, Hashed = types["Ordered"], types["FrozenChild"], types["Hashed"]
    seen: list[object] = []

    def attempt(action: Any) -> object:
        try:
            return action()
        except (TypeError, AttributeError, dataclasses.FrozenInstanceError) as exc:
            return f"{type(exc).__name__}: {exc}"

    p = Point(1)
    seen += [repr(p), p == Point(1), p == Point(2), hash(p) == hash(Point(1)), p.__match_args__]
    seen.append(attempt(lambda: setattr(p, "x", 5)))
    seen.append(attempt(lambda: delattr(p, "x")))
    seen.append(attempt(lambda: setattr(p, "other", 5)))
    c = Child(step=3, note="n")
    seen += [c.step, c.t, c.seen, c.extra, dataclasses.asdict(c), [f.name for f in dataclasses.fields(c)]]
    seen += [c == Child(step=3, note="n"), attempt(Child), attempt(lambda: Child(step=1, bogus=2))]
    m = Mutable(1)
    seen += [repr(m), m == Mutable(1), Mutable.__hash__, attempt(lambda: hash(m)), m.hidden]
    seen += [repr(dataclasses.replace(m, b="c")), attempt(lambda: Mutable(1, 2, 3)), Mutable.__match_args__]
    seen += [copy.deepcopy(m) == m, copy.copy(p) == p]
    seen += [Ordered(1) < Ordered(2), repr(sorted([Ordered(3), Ordered(1)])), attempt(lambda: Ordered(1) < 2)]
    f = FrozenChild(1)
    seen += [
        repr(f),
        f == FrozenChild(1),
        hash(f) == hash(FrozenChild(1)),
        attempt(lambda: setattr(f, "y", 0)),
    ]
    seen += [hash(Hashed(4)) == hash(Hashed(4)), Hashed(4) == Hashed(4)]
    seen += [str(types["Mutable"].__dataclass_params__), types["Point"].__dataclass_params__.frozen]
    Slotted, SlottedMutable = types["Slotted"], types["SlottedMutable"]
    slotted = Slotted("RUN001", 2)
    seen += [repr(slotted), slotted == Slotted("RUN001", 2), hash(slotted) == hash(Slotted("RUN001", 2))]
    seen += [Slotted.__slots__, attempt(lambda: setattr(slotted, "count", 3)), hasattr(slotted, "__dict__")]
    seen += [copy.copy(slotted) == slotted, copy.deepcopy(slotted) == slotted]
    mutable = SlottedMutable(1)
    mutable.a = 2
    seen += [repr(mutable), attempt(lambda: setattr(mutable, "other", 1)), SlottedMutable.__hash__]
    return seen


def test_lazy_classes_behave_like_dataclasses() -> None:
    assert behaviour(LAZY) == behaviour(PLAIN)


@lazy_dataclass(frozen=True)
class Pickled:
    a: int
    b: list[int] = field(default_factory=list, compare=False)


@lazy_dataclass(frozen=True, slots=True)
class PickledSlots:
    a: int
    b: str = "b"


def test_a_frozen_lazy_instance_pickles() -> None:
    again = pickle.loads(pickle.dumps(Pickled(3, [1])))
    assert again == Pickled(3)
    assert again.b == [1]
    slotted = pickle.loads(pickle.dumps(PickledSlots(4, "c")))
    assert (slotted.a, slotted.b) == (4, "c")


def test_methods_are_compiled_on_first_use_only() -> None:
    types = make_types(lazy_dataclass)
    Mutable = types["Mutable"]
    assert all(_is_stub(Mutable, name) for name in ("__init__", "__repr__", "__eq__"))
    m = Mutable(1)
    assert not _is_stub(Mutable, "__init__")
    assert _is_stub(Mutable, "__repr__")  # not needed yet: still not compiled
    assert _is_stub(Mutable, "__eq__")
    assert repr(m).endswith("Mutable(a=1, b='b', hidden=0)")
    assert not _is_stub(Mutable, "__repr__")
    assert _is_stub(Mutable, "__eq__")


def test_event_types_compile_nothing_at_import() -> None:
    """The event types are imported by every instrumented trainer process: importing them
    compiles no method (a fresh interpreter: this one may have built every type already)."""
    code = (
        "import trainmedic.events as e\n"
        "kinds = list(e.EVENT_TYPES.values())\n"
        "print(sum(getattr(k.__dict__.get('__init__'), '__lazy_stub__', False) for k in kinds), len(kinds))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    stubs, kinds = map(int, done.stdout.split())
    assert kinds >= 20
    assert stubs == kinds


def test_inheritance_rules_of_frozen_classes_are_kept() -> None:
    @lazy_dataclass(frozen=True)
    class Frozen:
        a: int

    with pytest.raises(TypeError, match="cannot inherit non-frozen dataclass from a frozen one"):

        @lazy_dataclass
        class Thawed(Frozen):
            b: int = 0

    @lazy_dataclass
    class Plain:
        a: int

    with pytest.raises(TypeError, match="cannot inherit frozen dataclass from a non-frozen one"):

        @lazy_dataclass(frozen=True)
        class Refrozen(Plain):
            b: int = 0

    assert Frozen.__dataclass_params__.frozen  # a failed subclass left the base as it was


def test_unsupported_options_are_refused_plainly() -> None:
    with pytest.raises(TypeError, match=r"unsupported options \['weakref_slot'\]; use dataclass\(\)"):
        lazy_dataclass(weakref_slot=True)
    with pytest.raises(TypeError, match="does not support InitVar"):

        @lazy_dataclass
        class WithInitVar:
            a: dataclasses.InitVar[int]
