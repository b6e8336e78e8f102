"""The gate used when nothing can ask a person, and the sudo command line."""

from __future__ import annotations

import pytest

from registry_core.dispatch.gate import ElevationRequest, Kind, RefusingGate, sudo_argv
from registry_core.errors import ElevationDeniedError

REQUEST = ElevationRequest("fix-dns", Kind.SUDO, ("sudo", "-A", "--", "/t/fix"), {}, "/work")


def test_the_refusing_gate_denies_with_its_default_reason() -> None:
    with pytest.raises(ElevationDeniedError) as caught:
        RefusingGate().authorize(REQUEST)
    assert caught.value.reason == "no elevation broker or front-end is available"
    assert str(caught.value) == "elevation denied: no elevation broker or front-end is available"


def test_the_refusing_gate_denies_with_the_reason_it_was_given() -> None:
    with pytest.raises(ElevationDeniedError) as caught:
        RefusingGate("the broker is paused").authorize(REQUEST)
    assert caught.value.reason == "the broker is paused"


def test_the_refusing_gate_has_no_sudo_refusal_to_report() -> None:
    assert RefusingGate().report_sudo("grant", 1, auth_failed=True) is None


def test_sudo_reads_the_password_through_askpass_and_ends_its_options() -> None:
    assert sudo_argv("/t/fix") == ["sudo", "-A", "--", "/t/fix"]
    assert sudo_argv("/t/-x", sudo="/usr/bin/sudo") == ["/usr/bin/sudo", "-A", "--", "/t/-x"]
