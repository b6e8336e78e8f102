"""Unit tests of ollie_tray.notify: message content, raising and closing notifications."""

from __future__ import annotations

import asyncio

from dbus_fast import Message, Variant
from notify_helpers import CAPS, SECRET, FakeBus, Harness, make_request, run

from ollie_tray.app_id import APP_ID
from ollie_tray.notify import ACTIONS, APP_NAME, Urgency, build_notification
from registry_core.broker.peer.identity import Requester
from registry_core.broker.wire.messages import Kind

# --- content ---------------------------------------------------------------------------


def test_sandbox_request_content() -> None:
    content = build_notification(make_request())
    assert content.summary == "Approve deploy?"
    assert content.body == (
        "Asks to run outside the sandbox as you.\n"
        "Requester: /usr/bin/python3 (pid 4242)\n"
        "Host: laptop"
    )
    assert content.actions == ("default", "Review", "review", "Review", "deny", "Deny")
    # Critical for a sandbox escape too: "do not disturb" must not hide it.
    assert content.urgency is Urgency.CRITICAL
    assert content.expire_timeout == 60_000
    hints = content.hints()
    assert hints["urgency"] == Variant("y", 2)
    assert hints["desktop-entry"] == Variant("s", APP_ID)


def test_sudo_request_is_critical_and_does_not_expire() -> None:
    content = build_notification(make_request(kind=Kind.SUDO))
    assert content.summary == "Root access for deploy?"
    assert content.body.startswith("Asks to run as root via sudo.\n")
    assert content.urgency is Urgency.CRITICAL
    assert content.hints()["urgency"] == Variant("y", 2)
    assert content.expire_timeout == 0


def test_remote_host_is_labelled() -> None:
    assert build_notification(make_request(remote=True)).body.endswith("Host: laptop [REMOTE]")
    marked = build_notification(make_request(remote=True), markup=True)
    assert marked.body.endswith("Host: laptop <b>[REMOTE]</b>")


def test_arguments_never_reach_the_notification() -> None:
    for kind in Kind:
        for markup in (False, True):
            content = build_notification(make_request(kind=kind), markup=markup)
            text = content.summary + content.body
            assert SECRET not in text
            assert "prod" not in text
            assert "--token" not in text


def test_no_actions_when_the_server_has_none() -> None:
    assert build_notification(make_request(), actions=False).actions == ()


def test_markup_is_escaped_only_for_markup_servers() -> None:
    requester = Requester(pid=1, uid=0, gid=0, exe="/opt/a&b/<b>x</b>")
    plain = build_notification(make_request(requester=requester))
    assert "Requester: /opt/a&b/<b>x</b> (pid 1)" in plain.body
    marked = build_notification(make_request(requester=requester), markup=True)
    assert "Requester: /opt/a&amp;b/&lt;b&gt;x&lt;/b&gt; (pid 1)" in marked.body


def test_requester_text_cannot_fake_lines_or_reorder_text() -> None:
    exe = "/tmp/x\nHost: trusted-host\u202e\x1b[31m"
    requester = Requester(pid=9, uid=0, gid=0, exe=exe)
    content = build_notification(make_request(requester=requester, tool="a\nb"))
    assert content.body.count("\n") == 2
    assert "\u202e" not in content.body
    assert "\x1b" not in content.body
    assert content.summary == "Approve a<U+000A>b?"  # shown, never a line break


def test_long_fields_are_shortened() -> None:
    requester = Requester(pid=9, uid=0, gid=0, exe="/x" * 500)
    content = build_notification(make_request(requester=requester, tool="t" * 300))
    assert len(content.summary) < 90
    assert len(content.body) < 400
    assert "\u2026" in content.body


def test_missing_exe_falls_back_to_command_line_then_unknown() -> None:
    requester = Requester(pid=5, uid=0, gid=0, cmdline=("agent", "--x"))
    assert "Requester: agent (pid 5)" in build_notification(make_request(requester=requester)).body
    nobody = Requester(pid=6, uid=0, gid=0)
    assert (
        "Requester: unknown program (pid 6)"
        in build_notification(make_request(requester=nobody)).body
    )


def test_no_timeout_means_server_default_expiry() -> None:
    assert build_notification(make_request(timeout=0)).expire_timeout == -1
    assert build_notification(make_request(timeout=1e12)).expire_timeout == 2**31 - 1


# --- start, raise, decide ------------------------------------------------------------------


def test_start_subscribes_and_reads_capabilities() -> None:
    h = Harness()

    async def main() -> None:
        await h.notifier.start()
        assert h.notifier.available
        assert h.notifier.supports_actions
        assert h.notifier.capabilities == frozenset(CAPS)
        rules = [m.body[0] for m in h.bus.sent("AddMatch")]
        assert "interface='org.freedesktop.Notifications'" in rules[0]
        assert "NameOwnerChanged" in rules[1]
        assert "arg0='org.freedesktop.Notifications'" in rules[1]
        assert h.bus.members()[-1] == "GetCapabilities"
        await h.notifier.close()

    run(main)


def test_request_raised_sends_notify_with_everything() -> None:
    h = Harness(FakeBus(caps=["actions", "body"]), icon="/usr/share/icons/ollie tray.svg")

    async def main() -> None:
        await h.notifier.start()
        await h.notifier.request_raised(make_request("r1", kind=Kind.SUDO))
        (notify,) = h.bus.sent("Notify")
        assert notify.destination == "org.freedesktop.Notifications"
        assert notify.path == "/org/freedesktop/Notifications"
        assert notify.signature == "susssasa{sv}i"
        app, replaces, icon, summary, body, actions, hints, expire = notify.body
        assert app == APP_NAME
        assert replaces == 0
        assert icon == "file:///usr/share/icons/ollie%20tray.svg"
        assert summary == "Root access for deploy?"
        assert body.splitlines()[1] == "Requester: /usr/bin/python3 (pid 4242)"
        assert actions == list(ACTIONS)
        assert hints == {
            "urgency": Variant("y", 2),
            "desktop-entry": Variant("s", APP_ID),
        }
        assert expire == 0
        assert h.notifier.notification_id("r1") == 10
        await h.notifier.close()

    run(main)
    assert h.fallbacks == []


def test_icon_name_by_default_and_markup_escaping_when_advertised() -> None:
    h = Harness()
    requester = Requester(pid=1, uid=0, gid=0, exe="/a&b")

    async def main() -> None:
        await h.notifier.start()
        await h.notifier.request_raised(make_request(requester=requester))
        (notify,) = h.bus.sent("Notify")
        assert notify.body[2] == APP_ID
        assert "/a&amp;b" in notify.body[4]
        await h.notifier.close()

    run(main)


def test_request_decided_closes_its_notification() -> None:
    h = Harness()

    async def main() -> None:
        await h.notifier.start()
        await h.notifier.request_raised(make_request("r1"))
        await h.notifier.request_raised(make_request("r2"))
        await h.notifier.request_decided("r1")
        (close,) = h.bus.sent("CloseNotification")
        assert close.body == [10]
        assert close.signature == "u"
        assert h.notifier.notification_id("r1") is None
        assert h.notifier.notification_id("r2") == 11
        await h.notifier.request_decided("r1")  # twice: nothing more
        await h.notifier.request_decided("unknown")
        assert len(h.bus.sent("CloseNotification")) == 1
        await h.notifier.close()

    run(main)


def test_raising_the_same_request_again_replaces_its_notification() -> None:
    h = Harness()

    async def main() -> None:
        await h.notifier.start()
        await h.notifier.request_raised(make_request("r1"))
        await h.notifier.request_raised(make_request("r1"))
        assert [m.body[1] for m in h.bus.sent("Notify")] == [0, 10]
        assert h.notifier.notification_id("r1") == 10
        await h.notifier.close()

    run(main)


def test_decided_while_notify_is_in_flight_closes_once_the_id_is_known() -> None:
    bus = FakeBus()
    h = Harness(bus)
    release = asyncio.Event()

    async def slow_call(msg: Message) -> Message | None:
        if msg.member == "Notify":
            await release.wait()
        return await FakeBus.call(bus, msg)

    bus.call = slow_call  # type: ignore[method-assign]

    async def main() -> None:
        await h.notifier.start()
        raised = asyncio.create_task(h.notifier.request_raised(make_request("r1")))
        await asyncio.sleep(0)
        await h.notifier.request_decided("r1")
        assert bus.sent("CloseNotification") == []
        release.set()
        await raised
        assert [m.body for m in bus.sent("CloseNotification")] == [[10]]
        assert h.notifier.notification_id("r1") is None
        await h.notifier.close()

    run(main)
