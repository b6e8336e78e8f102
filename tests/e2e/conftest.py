"""Fixtures of the end-to-end tests; the harness itself is ``e2e_harness.py``.

- ``desktop`` (session): a private D-Bus session bus without service
  auto-activation, Xvfb with trayer, dunst, an unlocked gnome-keyring.
- ``e2e`` (per test): :class:`e2e_harness.E2E`, fresh trays and agent
  calls, screenshots, and the leak check after the test.

The sudo scenarios' test user is a fixture of ``test_sudo.py`` (module scope).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
for _entry in (HERE, HERE.parent / "integration"):
    if str(_entry) not in sys.path:
        sys.path.insert(0, str(_entry))

import desktop_session as ds  # noqa: E402
from e2e_harness import E2E, Desktop, require_desktop, trayer_panel  # noqa: E402

TRAYER = ["trayer", "--edge", "top", "--align", "right", "--widthtype", "request"]
TRAYER += ["--height", "24"]


@contextmanager
def screen_with_tray(base: Path, home: str, attempts: int = 2) -> Iterator[str]:
    """Xvfb with trayer on it; yields the display.

    Tried twice: once, on a machine shared with other test runs starting and
    stopping X servers, trayer could not open the display Xvfb had just
    reported ready (its socket was gone); a fresh Xvfb is the remedy."""
    for attempt in range(attempts):
        where = base / f"screen{attempt}"
        where.mkdir()
        with ExitStack() as stack:
            display = stack.enter_context(ds.xvfb(where))
            xenv = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "DISPLAY": display}
            trayer = stack.enter_context(
                ds.running(TRAYER, {**xenv, "HOME": home}, where / "trayer.log")
            )
            try:
                ds.wait_until(
                    lambda: trayer_panel(display),  # noqa: B023 (called in this iteration)
                    "trayer's panel",
                    proc=trayer,
                    log=where / "trayer.log",
                )
            except ds.DesktopSessionError:
                if attempt == attempts - 1:
                    raise
                continue
            yield display
            return


@pytest.fixture(scope="session")
def desktop(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Desktop]:
    require_desktop()
    base = tmp_path_factory.mktemp("desktop")
    with ExitStack() as stack:
        env = stack.enter_context(ds.dbus_session(base))
        display = stack.enter_context(screen_with_tray(base, env["HOME"]))
        notifications = base / "notifications"
        notifications.mkdir()
        dunst_env = stack.enter_context(ds.dunst(env, notifications))
        stack.enter_context(ds.gnome_keyring(env, base))
        yield Desktop(env=env, display=display, dunst_env=dunst_env, base=base)


@pytest.fixture
def e2e(desktop: Desktop, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[E2E]:
    harness = E2E(desktop, tmp_path, request.node.name)
    try:
        yield harness
    finally:
        leaks = harness.close()
    if leaks:
        pytest.fail("processes left running after the test (now killed):\n" + "\n".join(leaks))
