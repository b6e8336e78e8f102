"""Dispatch: validate a call, sandbox or elevate it, run the tool, interpret its output."""

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
