"""Dataclasses whose generated methods are compiled on first use instead of at import.

`dataclasses.dataclass` compiles `__init__`, `__repr__`, `__eq__` (and `__hash__`,
the ordering methods) with `exec` while the class is being defined: about 0.15 ms a
method, some 20 ms for trainmedic's record types, paid at the start of every
`trainmedic run` and of every instrumented trainer process, although one run builds
only a few of those types. `lazy_dataclass` takes the same options and makes the same
class (its fields, `fields`/`asdict`/`replace`, match args, the hashing rules of
`dataclass`); only its generated methods start as stubs. The first call of any of
them has `dataclass()` compile the real methods on a twin class with the same fields
and puts them on the class, so behaviour is dataclass()'s own, compiled later.

Why not a library: attrs and pydantic also generate their methods at class creation.
Limits: no `InitVar` (use `dataclass` there); frozen classes get `__setattr__`/
`__delattr__` that refuse every field, as dataclass()'s do, and with `slots=True` the
same `__getstate__`/`__setstate__` for pickling.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar, cast

_C = TypeVar("_C", bound=type)

_ORDER = ("__lt__", "__le__", "__gt__", "__ge__")
_dataclass = dataclasses.dataclass


if TYPE_CHECKING:
    # For type checkers it is dataclass() itself: same options, same class, same checks.
    from dataclasses import dataclass as lazy_dataclass
else:

    def lazy_dataclass(cls: Any = None, /, **options: bool) -> Any:
        """`dataclass` with the same options (not `match_args`, `weakref_slot`)."""
        unknown = set(options) - {"init", "repr", "eq", "order", "unsafe_hash", "frozen", "kw_only", "slots"}
        if unknown:
            raise TypeError(f"lazy_dataclass() got unsupported options {sorted(unknown)}; use dataclass()")

        def wrap(target: type) -> type:
            return _make(target, options)

        return wrap if cls is None else wrap(cls)


__all__ = ["lazy_dataclass"]


def _make(cls: _C, options: dict[str, bool]) -> _C:
    init = options.get("init", True)
    eq = options.get("eq", True)
    frozen = options.get("frozen", False)
    unsafe_hash = options.get("unsafe_hash", False)
    own = cls.__dict__
    # dataclass() keeps a method the class body defines; `__hash__ = None` that Python adds
    # to a body defining `__eq__` does not count as one
    explicit_hash = "__hash__" in own and not (own["__hash__"] is None and "__eq__" in own)
    generated: list[str] = []
    if init:
        generated.append("__init__")
    if options.get("repr", True):
        generated.append("__repr__")
    if eq:
        generated.append("__eq__")
    if options.get("order", False):
        generated.extend(_ORDER)
    if unsafe_hash or (eq and frozen and not explicit_hash):
        generated.append("__hash__")
    cls = _process_fields(
        cls, frozen=frozen, kw_only=options.get("kw_only", False), slots=options.get("slots", False)
    )
    if any(_is_initvar(f.type) for f in cls.__dict__["__dataclass_fields__"].values()):
        raise TypeError(f"{cls.__qualname__}: lazy_dataclass does not support InitVar; use dataclass()")
    params = cls.__dict__["__dataclass_params__"]
    for name in ("init", "repr", "eq", "order", "unsafe_hash", "frozen"):  # as dataclass() records them
        setattr(params, name, options.get(name, name in ("init", "repr", "eq")))
    for name in generated:
        if name not in own:
            setattr(cls, name, _stub(cls, name, options))
    if eq and not frozen and not unsafe_hash and not explicit_hash:
        cls.__hash__ = None  # type: ignore[assignment]  # as dataclass(eq=True): mutable, unhashable
    if frozen:
        _freeze(cls)
        if options.get("slots", False):  # what dataclass(frozen=True, slots=True) adds for pickle and copy
            cls.__getstate__ = _slots_getstate  # type: ignore[attr-defined]
            cls.__setstate__ = _slots_setstate  # type: ignore[attr-defined]
    return cls


def _slots_getstate(self: Any) -> list[Any]:
    return [getattr(self, f.name) for f in dataclasses.fields(self)]


def _slots_setstate(self: Any, state: list[Any]) -> None:
    for f, value in zip(dataclasses.fields(self), state, strict=True):
        object.__setattr__(self, f.name, value)


def _process_fields(cls: _C, *, frozen: bool, kw_only: bool, slots: bool) -> _C:
    """dataclass() without its methods: the fields, `__dataclass_fields__`, `__match_args__`
    (with `slots`, the new class dataclass() makes).

    dataclass() checks that a class is frozen exactly when its dataclass bases are; it runs
    here unfrozen (frozen's methods come from `_freeze`), so the check is done here and
    the frozen bases look unfrozen to it for that moment."""
    bases = [
        b.__dict__["__dataclass_params__"] for b in cls.__mro__[1:] if "__dataclass_params__" in b.__dict__
    ]
    if bases and any(p.frozen for p in bases) != frozen:
        kind = ("non-frozen", "frozen") if not frozen else ("frozen", "non-frozen")
        raise TypeError(f"cannot inherit {kind[0]} dataclass from a {kind[1]} one")
    frozen_bases = [p for p in bases if p.frozen]
    for p in frozen_bases:
        p.frozen = False
    try:
        made: Any = _dataclass(cls, init=False, repr=False, eq=False, kw_only=kw_only, slots=slots)
        return cast("_C", made)
    finally:
        for p in frozen_bases:
            p.frozen = True


def _is_initvar(annotation: object) -> bool:
    if isinstance(annotation, str):  # `from __future__ import annotations`
        return annotation.startswith(("InitVar", "dataclasses.InitVar"))
    return isinstance(annotation, dataclasses.InitVar)


def _stub(owner: type, name: str, options: dict[str, bool]) -> Callable[..., Any]:
    def stub(self: Any, *args: Any, **kwargs: Any) -> Any:
        _compile(owner, name, options)
        return owner.__dict__[name](self, *args, **kwargs)

    stub.__name__ = name
    stub.__qualname__ = f"{owner.__qualname__}.{name}"
    stub.__lazy_stub__ = True  # type: ignore[attr-defined]
    return stub


def _compile(owner: type, name: str, options: dict[str, bool]) -> None:
    """dataclass() compiles `name` (with the methods it goes with) on a twin with the same
    fields; they replace their stubs on `owner`. `__init__` alone is what most types need."""
    fields = dataclasses.fields(owner)
    namespace: dict[str, Any] = {
        # `object` for every type: a string annotation costs dataclass() two regex matches (is it
        # a ClassVar, an InitVar?); the real annotations go on the compiled methods below
        "__annotations__": {f.name: object for f in fields},
        "__module__": owner.__module__,
        "__qualname__": owner.__qualname__,
        # a twin without a docstring would have dataclass() build one from inspect.signature:
        # as costly as the compiling itself
        "__doc__": owner.__doc__ or owner.__name__,
    }
    for f in fields:
        namespace[f.name] = dataclasses.field(
            default=f.default,
            default_factory=f.default_factory,
            init=f.init,
            repr=f.repr,
            hash=f.hash,
            compare=f.compare,
            metadata=f.metadata,
            kw_only=f.kw_only,
        )
    if name == "__init__" and hasattr(owner, "__post_init__"):
        # the compiled __init__ calls self.__post_init__(): the owner's, looked up on the instance
        namespace["__post_init__"] = _no_post_init
    comparing = name not in ("__init__", "__repr__")  # __eq__, __hash__ and the ordering go together
    twin: type = _dataclass(
        type(owner.__name__, (), namespace),
        init=name == "__init__",
        repr=name == "__repr__",
        eq=comparing,
        order=comparing and options.get("order", False),
        unsafe_hash=comparing and options.get("unsafe_hash", False),
        # a frozen class's __init__ sets fields through object.__setattr__; its __hash__ hashes them
        frozen=name != "__repr__" and options.get("frozen", False),
        match_args=False,
    )
    for method in (name,) if not comparing else ("__eq__", "__hash__", *_ORDER):
        if getattr(owner.__dict__.get(method), "__lazy_stub__", False):
            compiled = twin.__dict__[method]
            if method == "__init__":
                compiled.__annotations__ = {f.name: f.type for f in fields if f.init} | {"return": None}
            setattr(owner, method, compiled)


def _no_post_init(self: Any) -> None:
    return None


def _freeze(cls: type) -> None:
    """dataclass(frozen=True)'s refusal, without compiling it: every field is read-only; other
    names too on the class itself (a subclass may add attributes that are not fields)."""
    names = frozenset(f.name for f in dataclasses.fields(cls))

    def __setattr__(self: Any, name: str, value: Any) -> None:
        if type(self) is cls or name in names:
            raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}")
        object.__setattr__(self, name, value)

    def __delattr__(self: Any, name: str) -> None:
        if type(self) is cls or name in names:
            raise dataclasses.FrozenInstanceError(f"cannot delete field {name!r}")
        object.__delattr__(self, name)

    if "__setattr__" not in cls.__dict__:
        cls.__setattr__ = __setattr__  # type: ignore[method-assign,assignment]
    if "__delattr__" not in cls.__dict__:
        cls.__delattr__ = __delattr__  # type: ignore[method-assign,assignment]
