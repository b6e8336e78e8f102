"""Shared pieces of the decision memo's unit tests: audit records compared without
their time, a memo entry.

Used by ``test_decision_memo.py``, ``test_decision_memo_pieces.py`` and
``test_decision_memo_gives_way.py``.  Imported as a plain module: pytest puts this
test directory on ``sys.path``; the name must not start with ``test_``.
"""

from __future__ import annotations

from typing import Any

from core_helpers import HOST

from registry_core.elevation import messages as m
from registry_core.elevation.decision_memo import Repeatable
from registry_core.elevation.policies import LookupStamp


def without_time(record: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in record.items() if k not in ("time", "request_id")}


def entry(snapshot: object, tool: str = "greet") -> Repeatable:
    return Repeatable(
        snapshot=snapshot,
        executable="/x",
        sha256="a" * 64,
        stamp=LookupStamp(0, 1.0, 1.0),
        tool=tool,
        host=HOST,
        decision=m.Decision.ALLOW,
        reason="r",
        remember="always",
        audit=(",", "}\n"),
    )
