"""``quick_init`` at its edges: each refusal word for word, keyword-only fields and
defaults, a class without fields, and the new ``__init__``'s names."""

from __future__ import annotations

import dataclasses
import inspect
import re

import pytest

from registry_core.elevation.frozen import GENERATED_INIT, quick_init
from registry_core.elevation.prompter import ApprovalRequest


def refused(message: str) -> pytest.RaisesExc[TypeError]:
    return pytest.raises(TypeError, match=f"^{re.escape(message)}$")


def test_each_refusal_in_words() -> None:
    class Plain:
        pass

    @dataclasses.dataclass
    class NotFrozen:
        a: int

    @dataclasses.dataclass(frozen=True)
    class PostInit:
        a: int

        def __post_init__(self) -> None:
            pass

    @dataclasses.dataclass(frozen=True, slots=True)
    class Slots:
        a: int

    @dataclasses.dataclass(frozen=True)
    class WithInitVar:
        a: int
        b: dataclasses.InitVar[int]

    @dataclasses.dataclass(frozen=True)
    class NotInInit:
        a: int
        b: int = dataclasses.field(default=0, init=False)

    @dataclasses.dataclass(frozen=True)
    class Factory:
        a: int
        b: list[int] = dataclasses.field(default_factory=list)

    with refused("Plain: quick_init is for frozen dataclasses"):
        quick_init(Plain)
    with refused("NotFrozen: quick_init is for frozen dataclasses"):
        quick_init(NotFrozen)
    with refused("PostInit: no __slots__ or __post_init__ with quick_init"):
        quick_init(PostInit)
    with refused("Slots: no __slots__ or __post_init__ with quick_init"):
        quick_init(Slots)
    with refused("WithInitVar: __init__ takes ['a', 'b'], not just its fields"):
        quick_init(WithInitVar)
    with refused("NotInInit: __init__ takes ['a'], not just its fields"):
        quick_init(NotInInit)
    with refused("Factory.b: only plain fields with quick_init"):
        quick_init(Factory)


def test_a_subclass_of_a_frozen_dataclass_is_judged_by_its_own_parameters() -> None:
    @dataclasses.dataclass(frozen=True)
    class Base:
        a: int

    class Sub(Base):  # not itself a dataclass: no parameters of its own
        pass

    with refused("Sub: quick_init is for frozen dataclasses"):
        quick_init(Sub)


def test_keyword_only_fields_and_defaults() -> None:
    @quick_init
    @dataclasses.dataclass(frozen=True)
    class Mixed:
        a: int
        b: str = "bee"
        c: int = dataclasses.field(default=3, kw_only=True)
        d: int = dataclasses.field(kw_only=True, default=4)

    assert vars(Mixed(1)) == {"a": 1, "b": "bee", "c": 3, "d": 4}
    assert vars(Mixed(1, "x", c=5, d=6)) == {"a": 1, "b": "x", "c": 5, "d": 6}
    with pytest.raises(TypeError):
        Mixed(1, "x", 5)  # type: ignore[misc]
    generated = getattr(Mixed, GENERATED_INIT)  # the dataclass's own, kept
    assert generated.__qualname__.endswith("Mixed.__init__")
    assert Mixed.__init__ is not generated
    assert inspect.signature(generated) == inspect.signature(Mixed.__init__)
    assert Mixed.__init__.__module__ == __name__
    assert Mixed.__init__.__qualname__ == generated.__qualname__
    assert str(inspect.signature(Mixed.__init__)) == (
        "(self, a: 'int', b: 'str' = 'bee', *, c: 'int' = 3, d: 'int' = 4) -> None"
    )


def test_a_class_without_fields() -> None:
    @quick_init
    @dataclasses.dataclass(frozen=True)
    class Empty:
        pass

    assert vars(Empty()) == {} and Empty() == Empty()
    with pytest.raises(TypeError):
        Empty(1)  # type: ignore[call-arg]


def test_the_new_init_is_named_like_the_old_one() -> None:
    init = ApprovalRequest.__init__
    assert init.__qualname__ == "ApprovalRequest.__init__"
    assert init.__module__ == "registry_core.elevation.prompter"
    assert init.__annotations__ == getattr(ApprovalRequest, GENERATED_INIT).__annotations__
    assert init.__annotations__["id"] == "str"
