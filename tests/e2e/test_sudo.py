"""Scenarios 5 and 6: a ``sudo: true`` tool, both gates, as an ordinary user.

The tray and the agent run as the test user ``ollie-sudo-test-<hex>`` (created
for this module by ``tests/integration/sudo_user.py``; the sudoers drop-in
lets it run anything with its password, and sudo asks every time), with
the user's own D-Bus session and gnome-keyring (``e2e_user.py``) and the
shared X display.  The agent runs ``ollie-tools call whoami_root``: the
approval dialog comes first, then sudo (``sudo -A``, askpass =
``ollie-askpass``) makes the tray ask for the password.

The password is a random marker (``Ollie-Marker-<hex>``).  While the flow
runs, a thread reads every process's ``/proc/<pid>/cmdline`` and
``environ`` for it (xdotool types it from its stdin); afterwards no file
in the test's directories, the session's logs, ``/tmp`` (files changed
since the test began) or ``/var/log`` may contain it.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest
import sudo_user
from e2e_driver import (
    APPROVAL_TITLE,
    MARKER_VAR,
    PASSWORD_TITLE,
    POLL,
    AgentCall,
    E2EError,
    approve_armed,
    click_button,
    find_window,
    texts_of,
)
from e2e_harness import E2E
from e2e_user import popen_as, prepare_tray_runtime, run_as, user_session
from harness_procs import stop_process
from sudo_user import SudoUser, UserDirs

pytestmark = [pytest.mark.e2e, pytest.mark.realstack]

TOOL = "whoami_root"
APPROVAL = APPROVAL_TITLE.format(tool=TOOL)
PASSWORD = PASSWORD_TITLE.format(tool=TOOL)
BIG_FILE = 64 * 1024 * 1024


@pytest.fixture(scope="module")
def account(desktop: Any) -> Iterator[SudoUser]:
    """The test user (its name unique to this run), for this module only."""
    with sudo_user.throwaway() as user:
        prepare_tray_runtime(user)
        xenv = {"PATH": "/usr/bin:/bin", "DISPLAY": desktop.display}
        probe = run_as(user, ["xwininfo", "-root"], xenv)
        if probe.returncode != 0:
            raise E2EError(f"{user.name} cannot open {desktop.display}: {probe.stderr}")
        yield user


class ExposureWatch:
    """Reads every process's argv and environment for ``needle`` until stopped."""

    def __init__(self, needle: bytes) -> None:
        self.needle = needle
        self.hits: set[str] = set()
        self.rounds = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.hits.update(sudo_user.processes_exposing(self.needle))
            self.rounds += 1
            self._stop.wait(POLL)

    def stop(self) -> set[str]:
        self._stop.set()
        self._thread.join(10)
        return self.hits


def files_exposing(needle: bytes, roots: list[Path], since: float) -> list[str]:
    """Regular files under ``roots`` containing ``needle``; under ``/tmp`` and
    ``/var/log`` only those changed since ``since`` (listed by ``find``, which is
    much faster than a Python walk over other sessions' files; the needle itself
    never goes into an argv)."""
    hits = [str(p) for p in sudo_user.files_containing(needle, roots)]
    recent = subprocess.run(
        [
            "find",
            "/tmp",
            "/var/log",
            "-xdev",
            "-type",
            "f",
            "-newermt",
            f"@{since:.0f}",
            "-size",
            f"-{BIG_FILE // 1024}k",
            "-print0",
        ],
        capture_output=True,
        check=False,
    ).stdout
    for name in filter(None, recent.split(b"\0")):
        with contextlib.suppress(OSError):
            if needle in Path(os.fsdecode(name)).read_bytes():
                hits.append(os.fsdecode(name))
    return sorted(set(hits))


class UserDesktop:
    """One test's user-side setup: directories, session bus + keyring, the tray."""

    def __init__(
        self, e2e: E2E, user: SudoUser, name: str, stack: Any, *, unlock: bool = True
    ) -> None:
        self.e2e = e2e
        self.user = user
        self.dirs = UserDirs(user, name)
        report = self.dirs.root / "report"
        report.mkdir(mode=0o700)
        os.chown(report, user.uid, user.gid)
        # The marker makes the bus and the keyring part of the leak check too.
        env = {**self.dirs.env(), MARKER_VAR: e2e.marker}
        self.session_env = stack.enter_context(
            user_session(user, self.dirs.root, env, e2e.tmp, unlock=unlock)
        )
        self.tray = e2e.start_tray(
            user=user,
            argv=[str(user.bin / "ollie-tray")],
            env=self.session_env,
            cwd=self.dirs.home,
            state_dir=report,
        )

    def call(self) -> AgentCall:
        return self.e2e.start_call(
            TOOL,
            self.dirs.env(),
            cwd=self.dirs.home,
            user=self.user,
            program=self.user.bin / "ollie-tools",
        )

    def approve(self, *keys: str, shot: str | None = None) -> dict[str, Any]:
        """Wait for the approval dialog and approve it (after ``keys``) once armed."""
        window = self.e2e.display.wait_window(APPROVAL)
        if keys:
            self.e2e.display.key(window, *keys)
        state = self.tray.wait_state(approve_armed, "Approve armed")
        if shot:
            self.e2e.shot(shot, window)
        click_button(self.e2e.display, state, "ApprovalDialog", "Approve")
        dialog = find_window(state, "ApprovalDialog")
        assert dialog is not None
        return dialog

    def password(
        self, secret: str, *keys: str, shot: str | None = None, checked: str | None = None
    ) -> None:
        """Type ``secret`` into the password dialog, press ``keys`` (then wait until
        the box labelled ``checked`` is ticked), then OK."""
        window = self.e2e.display.wait_window(PASSWORD)
        self.tray.wait_state(
            lambda s: find_window(s, "PasswordDialog") is not None, "the password dialog"
        )
        self.e2e.display.focus(window)
        self.e2e.display.type_text(secret)
        if keys:
            self.e2e.display.key(window, *keys)
        if checked is not None:
            self.tray.wait_state(
                lambda s: any(
                    checked in box for box in (find_window(s, "PasswordDialog") or {})["checked"]
                ),
                f"{checked!r} ticked",
            )
        if shot:
            self.e2e.shot(shot, window)
        self.e2e.display.key(window, "alt+o")


def uid_of(call: AgentCall) -> int:
    result = call.result(timeout=30)
    assert result.returncode == 0, result
    return int(json.loads(result.stdout)["uid"])


@pytest.fixture
def user_desktop(
    e2e: E2E, account: SudoUser, request: pytest.FixtureRequest
) -> Iterator[UserDesktop]:
    with ExitStack() as stack:
        setup = UserDesktop(e2e, account, f"e2e-{request.node.name[:36]}", stack)
        try:
            yield setup
        finally:
            for call in e2e.calls:
                call.stop()
            setup.tray.stop()  # before its bus goes; e2e's own teardown checks for leaks


def test_sudo_tool_asks_approval_then_password_and_keeps_it_secret(
    user_desktop: UserDesktop, e2e: E2E
) -> None:
    user = user_desktop.user
    since = time.time() - 1
    needle = user.password.encode()
    watch = ExposureWatch(needle)
    try:
        call = user_desktop.call()
        dialog = user_desktop.approve(shot="sudo-approval")
        assert any("RUN AS ROOT" in t for t in dialog["texts"]), dialog["texts"]
        user_desktop.password("not-the-password", shot="password-dialog")
        state = user_desktop.tray.wait_state(
            lambda s: any("Wrong password" in t for t in texts_of(s, "PasswordDialog")),
            "the retry state",
            timeout=30,
        )
        retry = [t for t in texts_of(state, "PasswordDialog") if "Wrong password" in t]
        assert retry == ["Wrong password, try again (2/3)"], retry
        window = e2e.display.wait_window(PASSWORD)
        e2e.shot("password-retry", window)
        user_desktop.password(user.password)
        assert uid_of(call) == 0
    finally:
        exposed = watch.stop()
    assert watch.rounds > 10
    assert not exposed, f"the password showed in {sorted(exposed)}"
    user_desktop.tray.stop()
    audit = user_desktop.dirs.audit.read_text()
    assert '"sudo"' in audit
    roots = [user_desktop.dirs.root, user.home, e2e.tmp, e2e.desktop.base]
    assert not files_exposing(needle, roots, since)


def test_keyring_spares_the_password_next_time(user_desktop: UserDesktop, e2e: E2E) -> None:
    user = user_desktop.user
    since = time.time() - 1
    needle = user.password.encode()
    watch = ExposureWatch(needle)
    try:
        first = user_desktop.call()
        user_desktop.approve()
        user_desktop.password(
            user.password, "alt+k", shot="password-keyring", checked="Remember in &keyring"
        )
        assert uid_of(first) == 0

        # Approval only: the password comes from the keyring, no dialog asks for it.
        second = user_desktop.call()
        user_desktop.approve("alt+r", "Down", "Down")  # and remember it for 15 minutes
        finished_without(second, e2e, PASSWORD)
        assert uid_of(second) == 0

        # Remembered policy and stored password: nothing asks at all.
        third = user_desktop.call()
        finished_without(third, e2e, APPROVAL, PASSWORD)
        assert uid_of(third) == 0
    finally:
        exposed = watch.stop()
    assert not exposed, f"the password showed in {sorted(exposed)}"
    user_desktop.tray.stop()
    roots = [user_desktop.dirs.root, user.home, e2e.tmp, e2e.desktop.base]
    assert not files_exposing(needle, roots, since)


def finished_without(call: AgentCall, e2e: E2E, *titles: str) -> None:
    deadline = time.monotonic() + 30
    while call.running():
        for title in titles:
            if e2e.display.windows(title):
                raise E2EError(f"a {title!r} window appeared")
        if time.monotonic() > deadline:
            raise E2EError(f"{call.argv} did not finish")
        time.sleep(POLL)


# --- no keyring without consent; a cancelled password is a refusal (77) -----------------

SECRET_INTERFACES = (
    "org.freedesktop.Secret.Service",
    "org.freedesktop.Secret.Collection",
    "org.freedesktop.Secret.Item",
    "org.freedesktop.Secret.Prompt",
    "org.freedesktop.Secret.Session",
)


class SecretServiceMonitor:
    """``dbus-monitor``, as the user, on the user's private session bus: Secret Service calls."""

    def __init__(self, desktop: UserDesktop) -> None:
        self.log = desktop.dirs.root / "secret-service-monitor.log"
        rules = [f"interface={name}" for name in SECRET_INTERFACES]
        rules.append("interface=org.freedesktop.DBus.Peer")  # our own readiness ping
        env = desktop.session_env
        with open(self.log, "wb") as out:
            self.proc = popen_as(
                desktop.user,
                ["dbus-monitor", "--address", env["DBUS_SESSION_BUS_ADDRESS"], *rules],
                env,
                desktop.dirs.root,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        deadline = time.monotonic() + 30
        while "org.freedesktop.DBus.Peer" not in self.text():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise E2EError(f"dbus-monitor did not start: {self.text()}")
            run_as(
                desktop.user,
                [
                    "dbus-send",
                    "--session",
                    "--dest=org.freedesktop.DBus",
                    "/",
                    "org.freedesktop.DBus.Peer.Ping",
                ],
                env,
            )
            time.sleep(POLL)

    def text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def stop(self) -> str:
        stop_process(self.proc)
        return self.text()


@pytest.fixture
def keyring_never_used(
    e2e: E2E, account: SudoUser, request: pytest.FixtureRequest
) -> Iterator[UserDesktop]:
    """A desktop whose keyring has no login collection yet (any use needs a Prompt)."""
    with ExitStack() as stack:
        setup = UserDesktop(e2e, account, f"e2e-{request.node.name[:36]}", stack, unlock=False)
        try:
            yield setup
        finally:
            for call in e2e.calls:
                call.stop()
            setup.tray.stop()


def test_no_keyring_without_consent_and_a_cancelled_password_exits_77(
    keyring_never_used: UserDesktop, e2e: E2E
) -> None:
    desktop = keyring_never_used
    monitor = SecretServiceMonitor(desktop)
    try:
        call = desktop.call()
        desktop.approve()
        window = e2e.display.wait_window(PASSWORD)
        desktop.tray.wait_state(
            lambda s: find_window(s, "PasswordDialog") is not None, "the password dialog"
        )
        e2e.display.key(window, "Escape")
        result = call.result(timeout=30)
    finally:
        traffic = monitor.stop()
    assert result.returncode == 77, result
    assert result.stdout == ""
    assert result.stderr == "elevation denied: password entry cancelled\n"
    # Nobody ticked "Remember in keyring": the Secret Service was never asked anything,
    # so it never raised a Prompt (unlock / "choose a password for the new keyring").
    assert "org.freedesktop.Secret.Prompt" not in traffic, traffic
    assert not [line for line in traffic.splitlines() if "org.freedesktop.Secret." in line], traffic
