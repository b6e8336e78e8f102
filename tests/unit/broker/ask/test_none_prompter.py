"""The ``none`` front-end never asks: it denies, and cancels password questions."""

from __future__ import annotations

import asyncio
import dataclasses

from registry_core.broker.ask.none import NO_FRONT_END, NonePrompter
from registry_core.broker.peer.identity import Requester
from registry_core.broker.question import (
    Approval,
    ApprovalRequest,
    PasswordAnswer,
    PasswordRequest,
    Prompter,
    Remember,
)
from registry_core.broker.wire.messages import Kind

REQUEST = ApprovalRequest(
    id="r1",
    tool="t",
    kind=Kind.SANDBOX,
    description="d",
    variant=None,
    executable="/bin/true",
    sha256=None,
    argv=("/bin/true",),
    args={},
    cwd="/",
    requester=Requester(pid=1, uid=0, gid=0),
    host="h",
    timeout=1.0,
)


def test_never_asks() -> None:
    prompter = NonePrompter()
    assert isinstance(prompter, Prompter)
    assert prompter.name == "none"
    assert prompter.available()
    approval = asyncio.run(prompter.ask_approval(REQUEST))
    assert approval == Approval(False, Remember.ONCE, NO_FRONT_END, no_front_end=True)
    assert approval.reason == "no front-end"
    password = PasswordRequest(id="p", approval=REQUEST, prompt="pw:", user="root", attempt=1)
    assert asyncio.run(prompter.ask_password(password)) == PasswordAnswer(None)
    prompter.request_decided("r1", True, "policy")


def test_sudo_is_denied_too() -> None:
    sudo = dataclasses.replace(REQUEST, kind=Kind.SUDO)
    assert not asyncio.run(NonePrompter().ask_approval(sudo)).approved
