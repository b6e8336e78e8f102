"""A quicker ``__init__`` for the frozen dataclasses every broker decision builds (issue 19).

A frozen dataclass's generated ``__init__`` stores each field through
``object.__setattr__`` (its own ``__setattr__`` refuses), a call per field:
about six times the cost of a plain dataclass's.  A remembered-policy decision
builds four of them (the request, its facts, the approval request, the
reply; some 40 fields), a connection one more.  :func:`quick_init` replaces
the generated ``__init__`` of such a class with one that takes the very same
parameters (names, order, keyword-only marks, defaults) and stores them in
the instance's ``__dict__`` directly.  Nothing else changes: the instances
stay frozen (``__setattr__``/``__delattr__`` still refuse), and equality,
hashing, ``repr`` and ``dataclasses.replace`` are the dataclass's own.

Only plain fields are supported: a class with ``__slots__`` of its own, a
``__post_init__``, an ``InitVar``, a field left out of ``__init__`` or one
with a ``default_factory`` is refused at import (``TypeError``), so the
quicker ``__init__`` never has to reproduce more of the dataclass machinery.
``tests/unit/elevation/test_frozen_init.py`` holds every decorated class's
``__init__`` to the generated one (signature and the instance it makes).
"""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any, TypeVar

T = TypeVar("T")

GENERATED_INIT = "_dataclass_generated_init"  # the replaced __init__, kept for the tests


def quick_init(cls: type[T]) -> type[T]:
    """Give the frozen dataclass ``cls`` an ``__init__`` that fills ``__dict__`` directly."""
    params = cls.__dict__.get("__dataclass_params__")
    if params is None or not params.frozen:
        raise TypeError(f"{cls.__name__}: quick_init is for frozen dataclasses")
    if "__slots__" in cls.__dict__ or hasattr(cls, "__post_init__"):
        raise TypeError(f"{cls.__name__}: no __slots__ or __post_init__ with quick_init")
    fields = dataclasses.fields(cls)  # type: ignore[arg-type]
    generated = list(inspect.signature(cls.__init__).parameters)[1:]
    if generated != [f.name for f in fields]:  # an InitVar, or a field not in __init__
        raise TypeError(f"{cls.__name__}: __init__ takes {generated}, not just its fields")
    defaults: dict[str, Any] = {}
    positional: list[str] = []
    keyword: list[str] = []
    body: list[str] = []
    for f in fields:
        if not f.init or f.default_factory is not dataclasses.MISSING:
            raise TypeError(f"{cls.__name__}.{f.name}: only plain fields with quick_init")
        param = f.name
        if f.default is not dataclasses.MISSING:
            defaults[f"_default_{f.name}"] = f.default
            param += f"=_default_{f.name}"
        (keyword if f.kw_only else positional).append(param)
        body.append(f"    _d[{f.name!r}] = {f.name}")
    signature = ", ".join(["self", *positional, *(["*", *keyword] if keyword else [])])
    source = "\n".join(
        [
            f"def __init__({signature}) -> None:",
            "    _d = self.__dict__",
            *(body or ["    pass"]),
        ]
    )
    namespace: dict[str, Any] = {}
    exec(source, dict(defaults), namespace)  # noqa: S102 - built from the class's own field names
    init = namespace["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__module__ = cls.__module__
    init.__doc__ = cls.__init__.__doc__
    init.__annotations__ = dict(cls.__init__.__annotations__)
    setattr(cls, GENERATED_INIT, cls.__init__)
    cls.__init__ = init  # type: ignore[method-assign]
    return cls
