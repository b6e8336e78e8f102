"""The gate used when nothing can ask a person, and the sudo command line."""

from __future__ import annotations

from pathlib import Path

import pytest

from registry_core.dispatch.gate import (
    ElevationRequest,
    Kind,
    RefusingGate,
    require_askpass,
    sudo_argv,
)
from registry_core.errors import ElevationDeniedError, UntrustedProgramError
from registry_core.pinned import pinned_argv
from registry_core.trusted import find_trusted

REQUEST = ElevationRequest("fix-dns", Kind.SUDO, ("sudo", "-A", "--", "/t/fix"), {}, "/work")


SHA = "0" * 64


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
    argv = sudo_argv("/t/-x", "ab" * 32, sudo="/opt/s/sudo", python="/opt/p/python3")
    assert argv == ["/opt/s/sudo", "-A", "--", *pinned_argv("/opt/p/python3", "ab" * 32, "/t/-x")]


def test_sudo_is_the_trusted_one_by_its_absolute_path_never_a_bare_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    planted = tmp_path / "sudo"
    planted.write_text("#!/bin/sh\n")
    planted.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    trusted = find_trusted("sudo")
    if trusted is None:
        with pytest.raises(UntrustedProgramError) as raised:
            sudo_argv("/t/fix", SHA)
        assert (raised.value.program, raised.value.package) == ("sudo", "sudo")
    else:
        assert sudo_argv("/t/fix", SHA)[:4] == [trusted, "-A", "--", find_trusted("python3")]
    with pytest.raises(UntrustedProgramError):
        sudo_argv("/t/fix", SHA, sudo="sudo")
    with pytest.raises(UntrustedProgramError):
        sudo_argv("/t/fix", SHA, sudo="/usr/bin/sudo", python="python3")


def test_without_ollies_askpass_a_sudo_run_is_refused() -> None:
    assert require_askpass("/venv/bin/ollie-askpass") == "/venv/bin/ollie-askpass"
    for missing in (None, ""):
        with pytest.raises(UntrustedProgramError) as raised:
            require_askpass(missing)
        assert str(raised.value) == (
            "ollie-askpass: not installed next to Ollie's Python interpreter "
            "(sudo tools need it): install the 'ollie-tray' package"
        )
