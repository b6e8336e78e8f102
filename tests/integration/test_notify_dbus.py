"""The notifier against a real dbus-daemon and a real notification server (dunst 1.9).

Each test gets a private session bus (nothing auto-activated) and, where it
says so, dunst on its own Xvfb; see ``desktop_session``.  What dunst displayed
is read back from its ``script`` log and ``dunstctl history``; actions are
invoked the way a click does (``dunstctl action`` / the context menu).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import desktop_session as ds
import pytest
from dbus_fast import Message, MessageType
from dbus_fast.aio import MessageBus

from ollie_tray.app_id import APP_ID
from ollie_tray.notify import Notifier
from registry_core.broker.decide.denials import Denial, DeniedBy
from registry_core.broker.peer.identity import Requester
from registry_core.broker.question import ApprovalRequest
from registry_core.broker.wire.messages import Kind

pytestmark = pytest.mark.realstack

SECRET = "tok-3e1f-very-secret"


def make_request(
    request_id: str = "r1",
    *,
    tool: str = "deploy",
    kind: Kind = Kind.SANDBOX,
    remote: bool = False,
    exe: str = "/usr/bin/agent",
    timeout: float = 60.0,
) -> ApprovalRequest:
    return ApprovalRequest(
        id=request_id,
        tool=tool,
        kind=kind,
        description="Deploys things",
        variant=0,
        executable=f"/opt/tools/{tool}",
        sha256="ab" * 32,
        argv=(f"/opt/tools/{tool}", "--token", SECRET),
        args={"token": SECRET},
        cwd="/home/alice/project",
        requester=Requester(pid=4242, uid=1000, gid=1000, exe=exe, cmdline=(exe, "--run")),
        host="buildhost",
        timeout=timeout,
        remote=remote,
    )


class Recorder:
    """Collects callback calls and lets a test wait for them."""

    def __init__(self) -> None:
        self.review: list[str] = []
        self.deny: list[str] = []
        self.fallback: list[tuple[str, str]] = []
        self._changed = asyncio.Event()

    def on_review(self, request_id: str) -> None:
        self.review.append(request_id)
        self._changed.set()

    def on_deny(self, request_id: str) -> None:
        self.deny.append(request_id)
        self._changed.set()

    def on_fallback(self, title: str, body: str) -> None:
        self.fallback.append((title, body))
        self._changed.set()

    async def wait_for(self, predicate: Callable[[], bool], timeout: float = 10.0) -> None:
        async with asyncio.timeout(timeout):
            while not predicate():
                self._changed.clear()
                await self._changed.wait()

    def notifier(self, env: dict[str, str], **kwargs: Any) -> Notifier:
        return Notifier(
            on_review=self.on_review,
            on_deny=self.on_deny,
            fallback=self.on_fallback,
            bus_address=env["DBUS_SESSION_BUS_ADDRESS"],
            **kwargs,
        )

    @contextlib.asynccontextmanager
    async def running(self, env: dict[str, str], **kwargs: Any) -> AsyncIterator[Notifier]:
        """A started notifier reporting to this recorder, closed on the way out."""
        notifier = self.notifier(env, **kwargs)
        await notifier.start()
        try:
            yield notifier
        finally:
            await notifier.close()


async def eventually(
    probe: Callable[[], Any], predicate: Callable[[Any], bool], timeout: float = 10.0
) -> Any:
    """Poll a blocking ``probe`` (off the loop) until ``predicate`` holds; return its value."""
    delay = 0.01
    async with asyncio.timeout(timeout):
        while True:
            value = await asyncio.to_thread(probe)
            if predicate(value):
                return value
            await asyncio.sleep(delay)
            delay = min(delay * 2, 0.2)


def shown_for(env: dict[str, str], summary: str) -> Callable[[], list[dict[str, str]]]:
    return lambda: [e for e in ds.dunst_shown(env) if e.get("summary") == summary]


@pytest.fixture
def desktop(tmp_path: Path) -> Iterator[dict[str, str]]:
    with ds.notification_session(tmp_path) as env:
        yield env


def test_request_raised_shows_a_notification_and_decided_closes_it(
    desktop: dict[str, str],
) -> None:
    rec_holder: list[Recorder] = []

    async def main() -> None:
        rec = Recorder()
        rec_holder.append(rec)
        async with rec.running(desktop) as notifier:
            assert notifier.available
            assert notifier.supports_actions
            assert "body-markup" in notifier.capabilities
            await notifier.request_raised(make_request("r1"))
            nid = notifier.notification_id("r1")
            assert nid is not None
            (entry,) = await eventually(shown_for(desktop, "Approve deploy?"), bool)
            assert int(entry["id"]) == nid
            assert entry["app_name"] == "Ollie Tray"
            assert entry["urgency"] == "CRITICAL"  # escape requests are critical too
            assert entry["desktop_entry"] == APP_ID
            assert "Asks to run outside the sandbox as you." in entry["body"]
            assert "Requester: /usr/bin/agent (pid 4242)" in entry["body"]
            assert "Host: buildhost" in entry["body"]
            assert "REMOTE" not in entry["body"]
            assert SECRET not in entry["body"]
            assert await asyncio.to_thread(ds.dunst_displayed, desktop) == 1

            await notifier.request_decided("r1")
            assert notifier.notification_id("r1") is None
            await eventually(lambda: ds.dunst_displayed(desktop), lambda n: n == 0)
            history = await asyncio.to_thread(ds.dunst_history, desktop)
            (closed,) = [h for h in history if h["id"] == nid]
            assert closed["summary"] == "Approve deploy?"
            assert closed["appname"] == "Ollie Tray"
            assert closed["urgency"] == "critical"
            assert closed["body"].startswith("Asks to run outside the sandbox as you.")
            assert closed["default_action_name"] == "default"

    asyncio.run(main())
    assert rec_holder[0].fallback == []


def test_sudo_request_is_critical_and_marks_remote_hosts(desktop: dict[str, str]) -> None:
    async def main() -> None:
        rec = Recorder()
        async with rec.running(desktop) as notifier:
            request = make_request("s1", tool="apt-install", kind=Kind.SUDO, remote=True)
            await notifier.request_raised(request)
            (entry,) = await eventually(shown_for(desktop, "Root access for apt-install?"), bool)
            assert entry["urgency"] == "CRITICAL"
            assert entry["timeout"] == "0"  # critical: never expires on its own
            assert "Asks to run as root via sudo." in entry["body"]
            # dunst advertises body-markup, so the label is markup and text escaped
            assert "Host: buildhost <b>[REMOTE]</b>" in entry["body"]
            await notifier.request_decided("s1")
            history = await eventually(lambda: ds.dunst_history(desktop), bool)
            assert history[0]["summary"] == "Root access for apt-install?"
            assert history[0]["urgency"] == "critical"
            assert history[0]["timeout"] == 0

    asyncio.run(main())


def test_sandbox_request_expires_with_the_request_timeout(desktop: dict[str, str]) -> None:
    async def main() -> None:
        async with Recorder().running(desktop) as notifier:
            await notifier.request_raised(make_request("t1", timeout=42.5))
            await notifier.request_decided("t1")
            history = await eventually(lambda: ds.dunst_history(desktop), bool)
            assert history[0]["timeout"] == 42_500_000  # dunst keeps microseconds

    asyncio.run(main())


def test_markup_in_requester_text_is_escaped(desktop: dict[str, str]) -> None:
    async def main() -> None:
        async with Recorder().running(desktop) as notifier:
            await notifier.request_raised(make_request("m1", exe="/opt/a&b/<i>agent</i>"))
            (entry,) = await eventually(shown_for(desktop, "Approve deploy?"), bool)
            assert "Requester: /opt/a&amp;b/&lt;i&gt;agent&lt;/i&gt; (pid 4242)" in entry["body"]

    asyncio.run(main())


def test_clicking_the_notification_asks_for_review(desktop: dict[str, str]) -> None:
    async def main() -> None:
        rec = Recorder()
        async with rec.running(desktop) as notifier:
            await notifier.request_raised(make_request("r1"))
            await eventually(shown_for(desktop, "Approve deploy?"), bool)
            await asyncio.to_thread(ds.dunst_action, desktop)  # dunstctl action 0
            await rec.wait_for(lambda: rec.review == ["r1"])
            assert rec.deny == []

    asyncio.run(main())


def test_review_and_deny_buttons_reach_the_right_request(desktop: dict[str, str]) -> None:
    async def main() -> None:
        rec = Recorder()
        async with rec.running(desktop) as notifier:
            await notifier.request_raised(make_request("a", tool="alpha"))
            await notifier.request_raised(make_request("b", tool="beta"))
            id_a, id_b = notifier.notification_id("a"), notifier.notification_id("b")
            assert id_a is not None
            assert id_b is not None
            assert id_a != id_b
            await eventually(lambda: ds.dunst_displayed(desktop), lambda n: n == 2)

            await asyncio.to_thread(ds.dunst_action, desktop, "deny", id_b)
            await rec.wait_for(lambda: rec.deny == ["b"])
            await asyncio.to_thread(ds.dunst_action, desktop, "review", id_a)
            await rec.wait_for(lambda: rec.review == ["a"])
            offered = (Path(desktop["OLLIE_TEST_DUNST_DIR"]) / "dmenu-offered").read_text()
            assert f"#Deny (Approve beta?) [{id_b},deny]" in offered
            assert f"#Review (Approve alpha?) [{id_a},review]" in offered
            assert rec.deny == ["b"]

    asyncio.run(main())


@contextlib.asynccontextmanager
async def spoofing_client(env: dict[str, str]) -> AsyncIterator[MessageBus]:
    """Another connection to the session bus, to send signals the notifier must ignore."""
    bus = await MessageBus(bus_address=env["DBUS_SESSION_BUS_ADDRESS"]).connect()
    try:
        yield bus
    finally:
        bus.disconnect()
        await bus.wait_for_disconnect()


def test_action_signals_from_another_client_are_ignored(desktop: dict[str, str]) -> None:
    async def main() -> None:
        rec = Recorder()
        async with (
            rec.running(desktop) as notifier,
            spoofing_client(desktop) as spoofer,
        ):
            await notifier.request_raised(make_request("r1"))
            nid = notifier.notification_id("r1")
            await eventually(shown_for(desktop, "Approve deploy?"), bool)
            await spoofer.send(
                Message(
                    message_type=MessageType.SIGNAL,
                    path="/org/freedesktop/Notifications",
                    interface="org.freedesktop.Notifications",
                    member="ActionInvoked",
                    signature="us",
                    body=[nid, "deny"],
                )
            )
            await asyncio.to_thread(ds.dunst_action, desktop)
            await rec.wait_for(lambda: rec.review == ["r1"])
            assert rec.deny == []

    asyncio.run(main())


def test_a_notification_the_person_dismissed_is_forgotten(desktop: dict[str, str]) -> None:
    async def main() -> None:
        async with Recorder().running(desktop) as notifier:
            await notifier.request_raised(make_request("r1"))
            await eventually(shown_for(desktop, "Approve deploy?"), bool)
            await asyncio.to_thread(ds.dunstctl, desktop, "close")
            async with asyncio.timeout(10):
                while notifier.notification_id("r1") is not None:
                    await asyncio.sleep(0.02)  # NotificationClosed is on its way
            await notifier.request_decided("r1")  # nothing left to close: no error

    asyncio.run(main())


def test_close_takes_open_notifications_away(desktop: dict[str, str]) -> None:
    async def main() -> None:
        notifier = Recorder().notifier(desktop)
        await notifier.start()
        await notifier.request_raised(make_request("r1"))
        await eventually(lambda: ds.dunst_displayed(desktop), lambda n: n == 1)
        await notifier.close()
        assert not notifier.available
        await eventually(lambda: ds.dunst_displayed(desktop), lambda n: n == 0)

    asyncio.run(main())


# --- without a notification server -------------------------------------------------------


def test_no_notification_server_falls_back(tmp_path: Path) -> None:
    with ds.dbus_session(tmp_path) as env:
        assert not ds.name_has_owner(env, ds.NOTIFICATIONS)

        async def main() -> Recorder:
            rec = Recorder()
            async with rec.running(env) as notifier:
                assert not notifier.available
                assert not notifier.supports_actions
                await notifier.request_raised(make_request("r1", kind=Kind.SUDO))
                await notifier.request_decided("r1")
            return rec

        rec = asyncio.run(main())
    ((title, body),) = rec.fallback
    assert title == "Root access for deploy?"
    assert "Requester: /usr/bin/agent (pid 4242)" in body
    assert SECRET not in body


def test_no_session_bus_falls_back(tmp_path: Path) -> None:
    async def main() -> Recorder:
        rec = Recorder()
        no_bus = {"DBUS_SESSION_BUS_ADDRESS": f"unix:path={tmp_path}/no-bus"}
        async with rec.running(no_bus) as notifier:
            assert not notifier.available
            await notifier.request_raised(make_request("r1"))
        return rec

    rec = asyncio.run(main())
    assert [title for title, _ in rec.fallback] == ["Approve deploy?"]


def test_a_server_started_later_is_found_and_one_that_leaves_is_not_used(
    tmp_path: Path,
) -> None:
    """Autostart order at login: the tray may come up before the notification daemon."""
    with ds.dbus_session(tmp_path) as env:

        async def main() -> Recorder:
            rec = Recorder()
            async with rec.running(env) as notifier:
                assert not notifier.available
                with ds.dunst(env, tmp_path) as denv:
                    await notifier.request_raised(make_request("late"))
                    assert notifier.available
                    await eventually(shown_for(denv, "Approve deploy?"), bool)
                    assert rec.fallback == []
                # dunst is gone now
                await notifier.request_raised(make_request("after", tool="other"))
                assert not notifier.available
            return rec

        rec = asyncio.run(main())
    assert [title for title, _ in rec.fallback] == ["Approve other?"]


# --- the harness's own rule --------------------------------------------------------------


def test_require_skips_locally_and_fails_under_ci(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ds.require("sh")  # present: nothing happens
    monkeypatch.setenv("PATH", str(tmp_path))  # nothing is installed here
    monkeypatch.delenv("CI", raising=False)
    message = "missing dunstctl, Xvfb; install with: apt-get install -y dunst xvfb"
    with pytest.raises(pytest.skip.Exception, match=message):
        ds.require("dunstctl", "Xvfb")
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI must run real-stack tests"):
        ds.require("dunstctl")


def test_unattended_denials_are_one_grouped_low_urgency_notification(
    desktop: dict[str, str],
) -> None:
    batch = [
        Denial(0.0, "write_note", "laptop", DeniedBy.PAUSED, "requests are paused"),
        Denial(0.0, "whoami_root", "laptop", DeniedBy.POLICY, "remembered: deny whoami_root"),
        Denial(0.0, "ghost<b>", "laptop", DeniedBy.UNKNOWN_TOOL, "no tool named 'ghost<b>'"),
    ]

    async def main() -> None:
        async with Recorder().running(desktop) as notifier:
            assert await notifier.notify_denials(batch)
            (entry,) = await eventually(shown_for(desktop, "Ollie denied 3 requests"), bool)
            assert entry["urgency"] == "LOW"
            assert "write_note — paused: requests are paused" in entry["body"]
            assert "whoami_root — remembered deny" in entry["body"]
            assert "ghost&lt;b&gt; — unknown tool" in entry["body"]  # markup escaped
            await asyncio.to_thread(ds.dunstctl, desktop, "close")
            history = await eventually(lambda: ds.dunst_history(desktop), bool)
            assert history[0]["urgency"] == "low"

    asyncio.run(main())
