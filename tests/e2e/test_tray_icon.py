"""Scenario 1: ``ollie-tray --demo`` shows its icon in trayer and serves a private socket.

The icon check does not trust Qt's own word (``isSystemTrayAvailable``): it
reads the X window tree.  trayer's panel is a top-level window named
``panel`` of class ``trayer``; a docked icon is an XEmbed client reparented
into it.  So the tray's icon is there when ``xwininfo -root -tree`` shows,
under the panel, a viewable window whose ``_NET_WM_PID`` is the tray's pid
(the panel also grew to make room for it).  A crop of the screen at that
spot must show more than one colour: the icon was painted, not just mapped.
"""

from __future__ import annotations

import os
import stat

import e2e_driver as drv
import pytest
from e2e_driver import IconWindow
from e2e_harness import E2E

pytestmark = [pytest.mark.e2e, pytest.mark.realstack]


def test_icon_docks_in_trayer_and_socket_is_private(e2e: E2E) -> None:
    tray = e2e.start_tray(demo=True)
    tray.wait_icon()

    def settled() -> IconWindow | None:
        # trayer moves a newly docked icon into place and the icon paints after
        # mapping: wait for both (the panel behind an empty slot is one colour).
        icon = drv.tray_icon(e2e.display, tray.pid)
        if icon is None or not 0 <= icon.y < 24:
            return None
        painted = e2e.display.colours(icon.x, icon.y, icon.width, icon.height) > 2
        return icon if painted else None

    icon = drv.wait_for(settled, "the icon in place in the 24-pixel panel, painted")
    assert icon.width >= 16 and icon.height >= 16, icon
    state = tray.wait_state(lambda s: s["tray"] == "idle", "idle tray state")
    assert state["pending"] == 0
    e2e.shot("tray-icon")

    sock = os.stat(tray.socket)
    directory = os.stat(tray.socket.parent)
    assert stat.S_ISSOCK(sock.st_mode)
    assert stat.S_IMODE(sock.st_mode) == 0o600, oct(sock.st_mode)
    assert stat.S_ISDIR(directory.st_mode)
    assert stat.S_IMODE(directory.st_mode) == 0o700, oct(directory.st_mode)
    assert sock.st_uid == directory.st_uid == os.getuid()
    # The default place: $XDG_RUNTIME_DIR/ollie/elevate.sock, as the tray reports it.
    assert f"listening on {tray.socket}" in tray.log_text()

    assert tray.stop() == 0
    assert not tray.socket.exists()
