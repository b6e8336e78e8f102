"""Unit tests of ollie_tray.notify: signals, fallbacks and closing the notifier."""

from __future__ import annotations

import asyncio
import logging

import pytest
from notify_helpers import SECRET, SERVER, FakeBus, Harness, make_request, run

from ollie_tray.notify import Bus, Notifier
from registry_core.broker.wire.messages import Kind

# --- signals ---------------------------------------------------------------------------------


def test_actions_call_review_and_deny() -> None:
    h = Harness()

    async def main() -> None:
        await h.notifier.start()
        await h.notifier.request_raised(make_request("r1"))
        await h.notifier.request_raised(make_request("r2"))
        h.bus.emit("ActionInvoked", "us", [10, "default"])
        h.bus.emit("ActionInvoked", "us", [10, "review"])
        h.bus.emit("ActionInvoked", "us", [11, "deny"])
        h.bus.emit("ActionInvoked", "us", [11, "something-else"])
        h.bus.emit("ActionInvoked", "us", [99, "deny"])  # not ours
        await h.notifier.close()

    run(main)
    assert h.review == ["r1", "r1"]
    assert h.deny == ["r2"]


def test_activation_token_of_our_notification_reaches_the_app_before_review() -> None:
    tokens: list[str] = []
    h = Harness(on_activation_token=tokens.append)
    order: list[str] = []
    h.notifier._on_review = lambda rid: order.append(f"review {rid} after {list(tokens)}")

    async def main() -> None:
        await h.notifier.start()
        await h.notifier.request_raised(make_request("r1"))
        # As the specification orders them: the token first, then the action.
        h.bus.emit("ActivationToken", "us", [10, "kwin-token-1"])
        h.bus.emit("ActionInvoked", "us", [10, "review"])
        h.bus.emit("ActivationToken", "us", [99, "not-ours"])  # another app's notification
        h.bus.emit("ActivationToken", "us", [10, "forged"], sender=":1.99")  # not the server
        await h.notifier.close()

    run(main)
    assert tokens == ["kwin-token-1"]
    assert order == ["review r1 after ['kwin-token-1']"]


def test_signals_from_other_senders_are_ignored() -> None:
    h = Harness()

    async def main() -> None:
        await h.notifier.start()
        await h.notifier.request_raised(make_request("r1"))
        h.bus.emit("ActionInvoked", "us", [10, "deny"], sender=":1.99")
        h.bus.emit("NotificationClosed", "uu", [10, 2], sender=":1.99")
        assert h.notifier.notification_id("r1") == 10
        await h.notifier.close()

    run(main)
    assert h.deny == []


def test_notification_closed_forgets_the_request() -> None:
    h = Harness()

    async def main() -> None:
        await h.notifier.start()
        await h.notifier.request_raised(make_request("r1"))
        h.bus.emit("NotificationClosed", "uu", [10, 2])
        assert h.notifier.notification_id("r1") is None
        h.bus.emit("ActionInvoked", "us", [10, "deny"])  # late: ignored
        await h.notifier.request_decided("r1")
        assert h.bus.sent("CloseNotification") == []
        await h.notifier.close()

    run(main)
    assert h.deny == []


def test_async_callbacks_run_as_tasks_and_failures_are_contained(
    caplog: pytest.LogCaptureFixture,
) -> None:
    seen: list[str] = []

    async def review(request_id: str) -> None:
        seen.append(request_id)

    def deny(request_id: str) -> None:
        raise RuntimeError("callback broke")

    bus = FakeBus()

    async def connect() -> Bus:
        return bus

    notifier = Notifier(on_review=review, on_deny=deny, connect=connect)

    async def main() -> None:
        await notifier.start()
        await notifier.request_raised(make_request("r1"))
        bus.emit("ActionInvoked", "us", [10, "review"])
        bus.emit("ActionInvoked", "us", [10, "deny"])  # raises inside: logged
        await asyncio.sleep(0)
        await notifier.close()

    run(main)
    assert seen == ["r1"]
    assert "callback failed" in caplog.text


def test_malformed_signals_do_not_break_the_handler() -> None:
    h = Harness()

    async def main() -> None:
        await h.notifier.start()
        await h.notifier.request_raised(make_request("r1"))
        h.bus.emit("ActionInvoked", "u", [10])
        h.bus.emit("NotificationClosed", "", [])
        h.bus.emit("ActionInvoked", "us", [10, "deny"])
        await h.notifier.close()

    run(main)
    assert h.deny == ["r1"]


def test_server_restart_forgets_notifications_and_probes_again() -> None:
    h = Harness()

    async def main() -> None:
        await h.notifier.start()
        await h.notifier.request_raised(make_request("r1"))
        h.bus.owner_changed(SERVER, "")
        assert not h.notifier.available
        assert h.notifier.notification_id("r1") is None
        await h.notifier.request_raised(make_request("r2"))
        assert h.notifier.available
        assert h.bus.members().count("GetCapabilities") == 2
        assert h.notifier.notification_id("r2") == 11
        await h.notifier.close()

    run(main)
    assert h.fallbacks == []


def test_owner_change_signals_not_from_the_bus_are_ignored() -> None:
    h = Harness()

    async def main() -> None:
        await h.notifier.start()
        await h.notifier.request_raised(make_request("r1"))
        h.bus.emit("NameOwnerChanged", "sss", ["org.freedesktop.Notifications", SERVER, ""])
        assert h.notifier.notification_id("r1") == 10
        await h.notifier.close()

    run(main)


# --- fallbacks ----------------------------------------------------------------------------------


def test_no_server_uses_the_fallback() -> None:
    h = Harness(FakeBus(server=False))

    async def main() -> None:
        await h.notifier.start()
        assert not h.notifier.available
        await h.notifier.request_raised(make_request("r1", kind=Kind.SUDO, remote=True))
        await h.notifier.request_decided("r1")
        assert h.bus.sent("Notify") == []
        await h.notifier.close()

    run(main)
    ((title, body),) = h.fallbacks
    assert title == "Root access for deploy?"
    assert body.endswith("Host: laptop [REMOTE]")  # plain text, no markup
    assert SECRET not in body


def test_no_action_support_uses_the_fallback_instead_of_a_dead_notification() -> None:
    h = Harness(FakeBus(caps=["body"]))

    async def main() -> None:
        await h.notifier.start()
        assert h.notifier.available
        assert not h.notifier.supports_actions
        await h.notifier.request_raised(make_request("r1"))
        assert h.bus.sent("Notify") == []
        await h.notifier.close()

    run(main)
    assert [t for t, _ in h.fallbacks] == ["Approve deploy?"]


def test_no_action_support_and_no_fallback_sends_a_plain_notification() -> None:
    h = Harness(FakeBus(caps=["body"]), fallback=False)

    async def main() -> None:
        await h.notifier.start()
        await h.notifier.request_raised(make_request("r1"))
        (notify,) = h.bus.sent("Notify")
        assert notify.body[5] == []
        await h.notifier.close()

    run(main)


def test_connect_failure_uses_the_fallback_and_never_raises() -> None:
    fallbacks: list[tuple[str, str]] = []

    async def connect() -> Bus:
        raise FileNotFoundError("no bus socket")

    notifier = Notifier(
        on_review=print,
        on_deny=print,
        fallback=lambda t, b: fallbacks.append((t, b)),
        connect=connect,
    )

    async def main() -> None:
        await notifier.start()
        assert not notifier.available
        await notifier.request_raised(make_request())
        await notifier.request_decided("r1")
        await notifier.close()

    run(main)
    assert len(fallbacks) == 1


def test_notify_failure_falls_back() -> None:
    h = Harness(FakeBus(fail_notify=True))

    async def main() -> None:
        await h.notifier.start()
        await h.notifier.request_raised(make_request("r1"))
        assert h.notifier.notification_id("r1") is None
        await h.notifier.close()

    run(main)
    assert len(h.fallbacks) == 1


def test_a_hung_server_times_out_into_the_fallback() -> None:
    h = Harness(FakeBus(hang={"Notify"}), call_timeout=0.05)

    async def main() -> None:
        await h.notifier.start()
        assert h.notifier.available
        await h.notifier.request_raised(make_request("r1"))
        await h.notifier.close()

    run(main)
    assert len(h.fallbacks) == 1


def test_a_hung_bus_at_start_means_unavailable() -> None:
    h = Harness(FakeBus(hang={"GetCapabilities"}), call_timeout=0.05)

    async def main() -> None:
        await h.notifier.start()
        assert not h.notifier.available
        await h.notifier.close()

    run(main)


def test_a_failing_fallback_is_contained(caplog: pytest.LogCaptureFixture) -> None:
    def broken(title: str, body: str) -> None:
        raise RuntimeError("no tray")

    async def connect() -> Bus:
        return FakeBus(server=False)

    notifier = Notifier(on_review=print, on_deny=print, fallback=broken, connect=connect)

    async def main() -> None:
        await notifier.start()
        await notifier.request_raised(make_request())
        await notifier.close()

    with caplog.at_level(logging.ERROR):
        run(main)
    assert "fallback failed" in caplog.text


def test_no_fallback_and_no_server_only_logs(caplog: pytest.LogCaptureFixture) -> None:
    h = Harness(FakeBus(server=False), fallback=False)

    async def main() -> None:
        await h.notifier.start()
        await h.notifier.request_raised(make_request("r1"))
        await h.notifier.close()

    with caplog.at_level(logging.INFO):
        run(main)
    assert "not announced" in caplog.text


def test_a_disconnected_bus_falls_back() -> None:
    h = Harness()

    async def main() -> None:
        await h.notifier.start()
        h.bus.connected = False  # the bus daemon went away
        assert not h.notifier.available
        await h.notifier.request_raised(make_request("r1"))
        await h.notifier.close()

    run(main)
    assert len(h.fallbacks) == 1


# --- close -----------------------------------------------------------------------------------


def test_close_closes_open_notifications_and_disconnects() -> None:
    h = Harness()

    async def main() -> None:
        await h.notifier.start()
        await h.notifier.request_raised(make_request("r1"))
        await h.notifier.request_raised(make_request("r2"))
        await h.notifier.close()
        assert sorted(m.body[0] for m in h.bus.sent("CloseNotification")) == [10, 11]
        assert not h.bus.connected
        assert h.bus.handlers == []
        assert not h.notifier.available
        await h.notifier.close()  # idempotent
        await h.notifier.request_raised(make_request("r3"))  # after close: fallback

    run(main)
    assert [t for t, _ in h.fallbacks] == ["Approve deploy?"]


def test_start_twice_connects_once() -> None:
    connects = 0
    bus = FakeBus()

    async def connect() -> Bus:
        nonlocal connects
        connects += 1
        return bus

    notifier = Notifier(on_review=print, on_deny=print, connect=connect)

    async def main() -> None:
        await notifier.start()
        await notifier.start()
        await notifier.close()

    run(main)
    assert connects == 1
