"""What the broker core puts in front of the person for an ``elevate`` (from ``make mutate``).

The dialog shows the question's fields and the audit log records them: the
variant, the client's claim, the host and whether the request came from
another machine, and a host the request only claims. A forwarded request
without a remote tools directory is checked like a local one.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from core_helpers import HOST, FakePrompter, Setup, decide, write_tool

from registry_core.broker.decide.core import Broker, BrokerConfig
from registry_core.broker.peer.identity import Requester
from registry_core.broker.question import Approval, ApprovalRequest
from registry_core.broker.record.audit import AuditLog
from registry_core.broker.remember.policies import file_sha256
from registry_core.broker.wire import messages as m
from registry_core.pinned import pinned_argv
from registry_core.registry import Registry, RegistryLoader


def _asked(
    setup: Setup, req: m.ElevateRequest, requester: Requester | None = None
) -> ApprovalRequest:
    broker = setup.broker(FakePrompter([Approval(False)]))
    answer = broker.elevate_now(req, setup.requester if requester is None else requester)
    assert isinstance(answer, ApprovalRequest)
    return answer


def test_the_matching_variant_and_the_clients_claim_are_shown(setup: Setup) -> None:
    write_tool(
        setup.tools,
        "varied",
        {
            "description": "Two ways.",
            "variants": [{"match": {"env": "OLLIE_NOT_SET_EVER"}}, {"match": {"env": "PATH"}}],
        },
    )
    asked = _asked(setup, setup.request("varied", client="claude-code"))
    assert (asked.variant, asked.client) == (1, "claude-code")
    broker = setup.broker(FakePrompter([Approval(False)]))
    decide(broker, setup, setup.request("varied", client="claude-code"))
    [record] = setup.audit()
    assert (record["tool"], record["client"]) == ("varied", "claude-code")


@pytest.mark.parametrize("claim", [None, HOST])
def test_a_local_request_naming_this_host_or_none_claims_nothing(
    setup: Setup, claim: str | None
) -> None:
    asked = _asked(setup, setup.request(host=claim))
    assert (asked.host, asked.claimed_host, asked.remote) == (HOST, None, False)


@pytest.mark.parametrize(
    ("claim", "claimed"), [(None, None), ("build", None), ("laptop", "laptop")]
)
def test_a_forwarded_request_keeps_our_record_of_its_host_and_only_shows_a_differing_claim(
    setup: Setup, claim: str | None, claimed: str | None
) -> None:
    forwarded = dataclasses.replace(setup.requester, remote=True, host="build")
    asked = _asked(setup, setup.request(host=claim), forwarded)
    assert (asked.host, asked.claimed_host, asked.remote) == ("build", claimed, True)


def test_a_forward_from_a_host_of_our_own_name_is_still_remote(setup: Setup) -> None:
    forwarded = dataclasses.replace(setup.requester, remote=True, host=HOST)
    asked = _asked(setup, setup.request(), forwarded)
    assert (asked.host, asked.remote) == (HOST, True)


def test_a_forward_without_a_remote_tools_directory_runs_the_local_file(setup: Setup) -> None:
    """No tools directory recorded for the connection: the request is checked against
    the registry's own executable, as a local one is (no mismatch for the real path)."""
    forwarded = dataclasses.replace(setup.requester, remote=True, host="build", tools_dir="")
    asked = _asked(setup, setup.request(), forwarded)
    assert asked.mismatches == ()
    remote_dir = dataclasses.replace(forwarded, tools_dir="/home/bob/tools")
    there = pinned_argv(
        "/usr/bin/python3", file_sha256(setup.exe("greet")) or "", "/home/bob/tools/greet"
    )
    asked = _asked(setup, setup.request(argv=tuple(there)), remote_dir)
    assert asked.mismatches == ()


@pytest.mark.parametrize("paused", [False, True])
def test_the_one_name_snapshot_is_used_when_the_owner_has_one(
    setup: Setup, tmp_path: Path, paused: bool
) -> None:
    """A broker built with ``registry_for`` asks it for the requested tool only; the
    full scan (here: of an empty directory) is not what decides. Paused, the request
    is still checked against it (an unknown tool is an error, not a denial)."""
    empty = RegistryLoader([tmp_path / "no-tools"], {"PATH": "/usr/bin:/bin"})
    asked_for: list[str] = []

    def registry_for(name: str) -> Registry:
        asked_for.append(name)
        return setup.loader.lookup_registry(name)

    broker = Broker(
        registry=empty.load,
        registry_for=registry_for,
        prompter=FakePrompter([Approval(False)]),
        policies=setup.policies,
        audit=AuditLog(setup.audit_path),
        config=BrokerConfig(host=HOST),
    )
    broker.set_paused(paused)
    answer = broker.elevate_now(setup.request("other"), setup.requester)
    if paused:
        assert isinstance(answer, m.DecisionReply)
        assert (answer.by, answer.reason) == (m.DecidedBy.PAUSED, "requests are paused")
        [record] = setup.audit()
        assert (record["tool"], record["executable"]) == ("other", setup.exe("other"))
    else:
        assert isinstance(answer, ApprovalRequest)
        assert (answer.tool, answer.description) == ("other", "Another tool.")
    assert asked_for == ["other"]
