"""``quick_init`` (issue 19): the same ``__init__`` as the dataclass's, only quicker.

Every class the broker builds per decision or connection with the quicker
``__init__`` must take exactly the generated one's parameters and make the
very same instance, still frozen; a class the quicker ``__init__`` could not
reproduce is refused when it is decorated.
"""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from registry_core.elevation import messages as m
from registry_core.elevation.audit import AuditRequester
from registry_core.elevation.facts import RequestFacts
from registry_core.elevation.frozen import GENERATED_INIT, quick_init
from registry_core.elevation.identity import ProcessInfo, Requester
from registry_core.elevation.prompter import ApprovalRequest

QUICK = [
    m.ElevateRequest,
    m.DecisionReply,
    ApprovalRequest,
    RequestFacts,
    ProcessInfo,
    Requester,
    AuditRequester,
]
values = st.one_of(st.none(), st.integers(), st.text(max_size=5), st.tuples(st.integers()))


@pytest.mark.parametrize("cls", QUICK, ids=lambda c: c.__name__)
def test_the_quick_init_takes_the_generated_inits_parameters(cls: type) -> None:
    generated = getattr(cls, GENERATED_INIT)
    assert cls.__init__ is not generated
    assert inspect.signature(cls.__init__) == inspect.signature(generated)


@pytest.mark.parametrize("cls", QUICK, ids=lambda c: c.__name__)
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_the_quick_init_makes_the_generated_inits_instance(cls: type, data: Any) -> None:
    fields = dataclasses.fields(cls)
    given_ = {
        f.name: data.draw(values)
        for f in fields
        if f.default is dataclasses.MISSING or data.draw(st.booleans())
    }
    quick = cls(**given_)
    slow = cls.__new__(cls)
    getattr(cls, GENERATED_INIT)(slow, **given_)
    assert vars(quick) == vars(slow)
    assert quick == slow and repr(quick) == repr(slow)
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(quick, fields[0].name, 1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        delattr(quick, fields[0].name)
    if not any(f.kw_only for f in fields):  # positional arguments land where they did
        args = [given_.get(f.name) for f in fields]
        named = {f.name: a for f, a in zip(fields, args, strict=True)}
        assert vars(cls(*args)) == vars(cls(**named))


def test_missing_and_unknown_arguments_are_refused_as_before() -> None:
    with pytest.raises(TypeError, match="missing"):
        m.DecisionReply(id=1, decision=m.Decision.ALLOW, reason="r")  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="unexpected keyword"):
        RequestFacts("d", None, None, None, (), extra=1)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="positional"):
        m.DecisionReply(1, m.Decision.ALLOW, "r", m.DecidedBy.POLICY)  # type: ignore[misc]


def test_what_it_cannot_reproduce_is_refused() -> None:
    @dataclasses.dataclass
    class NotFrozen:
        a: int

    @dataclasses.dataclass(frozen=True)
    class Factory:
        a: list[int] = dataclasses.field(default_factory=list)

    @dataclasses.dataclass(frozen=True)
    class PostInit:
        a: int

        def __post_init__(self) -> None:
            pass

    @dataclasses.dataclass(frozen=True)
    class NotInInit:
        a: int
        b: int = dataclasses.field(default=0, init=False)

    @dataclasses.dataclass(frozen=True)
    class WithInitVar:
        a: int
        b: dataclasses.InitVar[int]

    @dataclasses.dataclass(frozen=True, slots=True)
    class Slots:
        a: int

    for cls in (NotFrozen, Factory, PostInit, NotInInit, WithInitVar, Slots):
        with pytest.raises(TypeError):
            quick_init(cls)
