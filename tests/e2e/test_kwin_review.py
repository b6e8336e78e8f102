"""Review in a notification (and a click on the icon) brings the buried dialog to the front on KWin.

A real ``kwin_wayland --virtual`` (KWin 5.27 on Debian 12), the tray as a
native Wayland client, everything as the ordinary test user.  The person is
busy in another application (``kwin_notifier.py``'s window, which is also
their notification server and panel); what KWin thinks is read from KWin itself, with
its scripting (``kwin_harness.KWin``) and its log of xdg-activation
decisions, never inferred from the tray's side.

The story, each step checked in KWin:

1. the other application has the focus when the request arrives;
2. the approval dialog maps (KWin 5.27 gives every new Wayland window the
   focus) and the person clicks back into their application: the dialog is
   buried, not active, below the other window;
3. *Review* with a made-up token: KWin refuses it (its log names that very
   token) and the dialog stays buried — without a token KWin issued the
   tray cannot take the focus, so this test can fail;
4. *Review* with a real token — asked from KWin over ``xdg_activation_v1``
   by the notification server for its own focused surface, as Plasma does —
   and the tray hands it to Qt: KWin activates the dialog on behalf of the
   notification server's window, and the dialog is active and on top.

The same for a click on the tray icon: the panel (here the same process, as
Plasma's panel is also its notification server) calls
``ProvideXdgActivationToken`` and then ``Activate`` on the StatusNotifierItem.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import kwin_harness as kh
import pytest
import sudo_user
import wayland_harness as wh
from e2e_driver import E2EError, wait_for
from sudo_user import SudoUser

pytestmark = [pytest.mark.e2e, pytest.mark.realstack]

TOOL = "write_protected_note"
BUSY = "Busy editor (notification server)"


@pytest.fixture(scope="module")
def kwin_user() -> Iterator[SudoUser]:
    wh.require_wayland("kwin_wayland", "dbus-daemon", "dbus-send")
    with sudo_user.throwaway() as user:
        yield user


@pytest.fixture
def ws(
    kwin_user: SudoUser, tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[wh.WaylandSession]:
    name = f"k{len(list(kwin_user.base.glob('k*')))}"
    with wh.session(kwin_user, name, request.node.name, tmp_path / "logs") as session:
        yield session


def _dialog(windows: list[kh.KWinWindow]) -> kh.KWinWindow | None:
    found = [
        w
        for w in windows
        if w.resource_class == "io.github.ollie_tray.OllieTray" and "approve" in w.caption.lower()
    ]
    return found[0] if found else None


def _busy(windows: list[kh.KWinWindow]) -> kh.KWinWindow:
    found = [w for w in windows if w.caption == BUSY]
    assert found, windows
    return found[0]


def _state(kwin: kh.KWin) -> tuple[kh.KWinWindow, kh.KWinWindow]:
    windows = kwin.windows()
    dialog = _dialog(windows)
    assert dialog is not None, windows
    return dialog, _busy(windows)


@dataclass
class Scene:
    kwin: kh.KWin
    notifier: kh.Notifier
    item: str  # the tray's StatusNotifierItem (bus name)
    note: int  # the request's notification id
    agent: subprocess.Popen[bytes]


def _buried_dialog(ws: wh.WaylandSession) -> Scene:
    """Steps 1 and 2: a request arrives while another app has the focus; the dialog is buried."""
    kwin = kh.kwin(ws)
    notifier = kh.Notifier(ws, BUSY)
    kwin.activate(BUSY)
    assert _busy(kwin.windows()).active
    ws.start_tray("--countdown", "120", "--verbose")
    item = notifier.expect("item")["service"]
    agent = ws.start_call(TOOL)
    note = notifier.expect("notify")
    assert "review" in note["actions"], note
    # The dialog maps (KWin 5.27 gives it the focus); the person clicks back into their app.
    mapped = wait_for(lambda: _dialog(kwin.windows()), "the approval dialog in KWin")
    assert mapped.resource_class == "io.github.ollie_tray.OllieTray"
    kwin.activate(BUSY)
    dialog, busy = _state(kwin)
    assert busy.active and not dialog.active, (busy, dialog)
    assert dialog.stacking_order < busy.stacking_order, (busy, dialog)
    return Scene(kwin, notifier, item, int(note["id"]), agent)


def _refused(ws: wh.WaylandSession, scene: Scene, token: str) -> None:
    """Step 3: KWin refused ``token`` for the dialog, which stays buried."""
    dialog, _busy_window = _state(scene.kwin)
    refused = re.compile(
        rf'Refusing to activate .*caption="{re.escape(dialog.caption)}".*"{re.escape(token)}"'
    )
    try:
        wait_for(lambda: refused.search(scene.kwin.log()), f"KWin refusing the token {token}")
    except E2EError as exc:
        raise E2EError(f"{exc}\n--- tray:\n{ws.log('tray')[-3000:]}") from exc
    dialog, busy = _state(scene.kwin)
    assert busy.active and not dialog.active, (busy, dialog)
    assert dialog.stacking_order < busy.stacking_order, (busy, dialog)


def _raised(scene: Scene, token: str) -> None:
    """Step 4: KWin activated the dialog with ``token``, on the busy window's behalf."""
    assert token and token != "not-granted-666", token  # KWin granted it to the focused window
    kwin = scene.kwin
    try:
        wait_for(lambda: _state(kwin)[0].active, "the dialog active after the click")
    except E2EError as exc:
        raise E2EError(f"{exc}\n--- kwin:\n{kwin.log()[-3000:]}") from exc
    dialog, busy = _state(kwin)
    assert dialog.active and not busy.active, (busy, dialog)
    assert dialog.stacking_order > busy.stacking_order, (busy, dialog)
    granted = re.compile(
        rf'activating .*caption="{re.escape(dialog.caption)}".* on behalf of .*'
        rf'caption="{re.escape(BUSY)}"'
    )
    assert granted.search(kwin.log()), kwin.log()[-3000:]


def _withdraw(scene: Scene) -> None:
    scene.agent.terminate()
    wait_for(lambda: scene.agent.poll() is not None, "the agent gone")
    wait_for(
        lambda: _dialog(scene.kwin.windows()) is None, "the dialog withdrawn with its requester"
    )


def test_review_raises_buried_dialog_with_token_on_kwin(ws: wh.WaylandSession) -> None:
    scene = _buried_dialog(ws)
    scene.kwin.screenshot(scene.notifier, "buried")
    bogus = scene.notifier.review(scene.note, "bogus")["token"]
    _refused(ws, scene, bogus)
    real = scene.notifier.review(scene.note, "real")["token"]
    _raised(scene, real)
    scene.kwin.screenshot(scene.notifier, "raised")
    _withdraw(scene)


def test_icon_click_raises_buried_dialog_with_token_on_kwin(ws: wh.WaylandSession) -> None:
    # The panel's click: ProvideXdgActivationToken, then Activate on the item.
    scene = _buried_dialog(ws)
    bogus = scene.notifier.click_icon(scene.item, "bogus")["token"]
    _refused(ws, scene, bogus)
    real = scene.notifier.click_icon(scene.item, "real")["token"]
    _raised(scene, real)
    scene.kwin.screenshot(scene.notifier, "raised")
    _withdraw(scene)
