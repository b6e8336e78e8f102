"""Dispatch: validate a call, sandbox or elevate it, run the tool, interpret its output.

Names are imported lazily (PEP 562): ``ollie-askpass`` and ``ollie-elevate``
need only the light ``gate`` module and must start fast, without jsonschema
and the sandbox.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from registry_core.dispatch.dispatcher import (
        CallOptions,
        Dispatcher,
        parallel_safe,
        plan_batches,
        sandbox_path,
        validate_args,
    )
    from registry_core.dispatch.gate import (
        Authorization,
        ElevationGate,
        ElevationRequest,
        Kind,
        RefusingGate,
    )
    from registry_core.dispatch.result import CallResult

_WHERE = {
    "CallOptions": "dispatcher",
    "Dispatcher": "dispatcher",
    "parallel_safe": "dispatcher",
    "plan_batches": "dispatcher",
    "sandbox_path": "dispatcher",
    "validate_args": "dispatcher",
    "Authorization": "gate",
    "ElevationGate": "gate",
    "ElevationRequest": "gate",
    "Kind": "gate",
    "RefusingGate": "gate",
    "CallResult": "result",
}

__all__ = [
    "Authorization",
    "CallOptions",
    "CallResult",
    "Dispatcher",
    "ElevationGate",
    "ElevationRequest",
    "Kind",
    "RefusingGate",
    "parallel_safe",
    "plan_batches",
    "sandbox_path",
    "validate_args",
]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'registry_core.dispatch' has no attribute {name!r}")
    return getattr(importlib.import_module(f"registry_core.dispatch.{module}"), name)
