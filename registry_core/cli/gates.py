"""Choose the elevation gate for a command-line call.

Until a broker answers on the socket, there is nobody to ask: every request
is denied with a reason that says so (fail closed).
"""

from __future__ import annotations

from collections.abc import Mapping

from registry_core.dispatch import ElevationGate, RefusingGate


def make_gate(env: Mapping[str, str]) -> ElevationGate:
    return RefusingGate("no elevation broker is running and no front-end can ask")
