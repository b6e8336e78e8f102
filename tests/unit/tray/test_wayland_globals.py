"""Asking the compositor for its globals: the decision, and every way it fails safe.

The real compositors (headless sway offers virtual input, headless weston
does not) are in ``tests/e2e/test_wayland_virtual_input.py``.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from ollie_tray.wayland_globals import (
    VIRTUAL_INPUT_GLOBALS,
    WaylandCheckError,
    advertised_globals,
    check_virtual_input,
    judge_globals,
)

BASE = frozenset({"wl_compositor", "wl_shm", "xdg_wm_base", "wl_seat"})
ENV = {"WAYLAND_DISPLAY": "wayland-test"}


@pytest.mark.parametrize("name", sorted(VIRTUAL_INPUT_GLOBALS))
def test_each_virtual_input_global_is_reported(name: str) -> None:
    check = check_virtual_input(ENV, probe=lambda _display: BASE | {name})
    assert check.warn and check.error is None
    assert check.offered == {name}
    assert name in check.describe()


def test_a_compositor_without_virtual_input_is_not_warned_about() -> None:
    asked: list[str] = []

    def probe(display: str) -> frozenset[str]:
        asked.append(display)
        return BASE | {"zwp_text_input_manager_v3", "zwp_input_method_manager_v2"}

    check = check_virtual_input(ENV, probe=probe)
    assert asked == ["wayland-test"]
    assert not check.warn and check.offered == frozenset()
    assert "no virtual input" in check.describe()


@pytest.mark.parametrize(
    ("env", "why"),
    [
        ({}, "WAYLAND_DISPLAY is not set"),
        ({"WAYLAND_DISPLAY": ""}, "WAYLAND_DISPLAY is not set"),
        ({**ENV, "WAYLAND_SOCKET": "7"}, "WAYLAND_SOCKET"),
    ],
)
def test_no_display_to_ask_warns(env: dict[str, str], why: str) -> None:
    def probe(_display: str) -> frozenset[str]:
        raise AssertionError("must not be asked")

    check = check_virtual_input(env, probe=probe)
    assert check.warn and check.error is not None and why in check.error
    assert "cannot tell" in check.describe()


def test_a_failing_probe_warns() -> None:
    def probe(_display: str) -> frozenset[str]:
        raise OSError("connection reset")

    check = check_virtual_input(ENV, probe=probe)
    assert check.warn and check.error is not None and "connection reset" in check.error


def test_a_registry_without_wl_compositor_warns() -> None:
    assert judge_globals(frozenset({"xdg_wm_base"})).warn
    assert judge_globals(frozenset()).warn


def test_a_compositor_that_never_answers_warns_within_the_deadline() -> None:
    release = threading.Event()

    def probe(_display: str) -> frozenset[str]:
        release.wait(30)
        return BASE

    started = time.monotonic()
    try:
        check = check_virtual_input(ENV, probe=probe, timeout_s=0.2)
    finally:
        release.set()
    assert time.monotonic() - started < 10
    assert check.warn and check.error is not None and "no answer" in check.error


def test_the_real_binding_reports_a_display_that_is_not_there(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    monkeypatch.delenv("WAYLAND_SOCKET", raising=False)
    with pytest.raises(WaylandCheckError, match="cannot connect"):
        advertised_globals("wayland-nobody-listens")
    check = check_virtual_input({"WAYLAND_DISPLAY": "wayland-nobody-listens"})
    assert check.warn and check.error is not None and "cannot connect" in check.error
