"""Shared pieces of the policy store's unit tests: a fake clock, entries, documents.

Imported as a plain module: pytest puts this test directory on ``sys.path``; the name
must not start with ``test_``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from registry_core.broker.question import Remember
from registry_core.broker.remember.policies import Policy, PolicyStore
from registry_core.broker.wire.messages import Kind

T0 = 1_750_000_000.0
EXE = "/opt/tools/greet"
SHA = "a" * 64
OTHER_SHA = "b" * 64
HOST = "laptop"


class FakeClock:
    def __init__(self, now: float = T0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def remember(store: PolicyStore, choice: Remember, **kw: Any) -> Policy | None:
    args: dict[str, Any] = {
        "tool": "greet",
        "kind": Kind.SANDBOX,
        "host": HOST,
        "executable": EXE,
        "sha256": SHA,
    }
    args.update(kw)
    return store.remember(
        args["tool"], args["kind"], args["host"], choice, args["executable"], args["sha256"]
    )


def lookup(store: PolicyStore, **kw: Any) -> Policy | None:
    args: dict[str, Any] = {
        "tool": "greet",
        "kind": Kind.SANDBOX,
        "host": HOST,
        "executable": EXE,
        "sha256": SHA,
    }
    args.update(kw)
    return store.lookup(
        args["tool"], args["kind"], args["host"], args["executable"], args["sha256"]
    )


def entry(**kw: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "tool": "greet",
        "kind": "sandbox",
        "host": HOST,
        "decision": "allow",
        "remember": "always",
        "created": "2025-06-15T15:06:40Z",
        "expires": None,
        "executable": EXE,
        "sha256": SHA,
    }
    base.update(kw)
    return base


def write_doc(path: Path, policies: list[Any], **top: Any) -> bytes:
    path.parent.mkdir(parents=True, exist_ok=True)
    data = yaml.safe_dump({"version": 1, "policies": policies, **top}, sort_keys=False).encode()
    path.write_bytes(data)
    return data
