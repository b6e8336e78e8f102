"""Unit tests of ollie_tray.secret_store: which backends qualify, failures, no secret in logs.

The fakes are duck-typed on purpose: subclassing ``keyring.backend.KeyringBackend``
registers the class in keyring's global backend list, which would change what
``keyring.get_keyring()`` picks for every later test in the process.
The real Secret Service is exercised in tests/integration/test_keyring_secret_service.py.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import Any, ClassVar

import keyring
import pytest
from keyring.backends import chainer, fail, null
from keyring.errors import KeyringError, KeyringLocked, PasswordDeleteError

from ollie_tray.secret_store import SERVICE, PasswordVault, backend_problem

PASSWORD = "pa55-w0rd-do-not-log"


class FakeBackend:
    """An in-memory keyring that keyring would recommend (priority 5)."""

    priority: ClassVar[float] = 5

    def __init__(self) -> None:
        self.entries: dict[tuple[str, str], str] = {}
        self.calls: list[tuple[str, str, str]] = []

    def get_password(self, service: str, username: str) -> str | None:
        self.calls.append(("get", service, username))
        return self.entries.get((service, username))

    def set_password(self, service: str, username: str, password: str) -> None:
        self.calls.append(("set", service, username))
        self.entries[(service, username)] = password

    def delete_password(self, service: str, username: str) -> None:
        self.calls.append(("delete", service, username))
        if (service, username) not in self.entries:
            raise PasswordDeleteError("No such password!")
        del self.entries[(service, username)]


class FakeRaisingBackend(FakeBackend):
    """Every operation raises ``error`` (whose message may even contain the secret)."""

    def __init__(self, error: BaseException) -> None:
        super().__init__()
        self.error = error

    def get_password(self, service: str, username: str) -> str | None:
        raise self.error

    def set_password(self, service: str, username: str, password: str) -> None:
        raise self.error

    def delete_password(self, service: str, username: str) -> None:
        raise self.error


class FakeLowPriorityBackend(FakeBackend):
    priority: ClassVar[float] = 0.5


class FakePlaintextKeyring(FakeBackend):
    pass


class FakeAltBackend(FakeBackend):
    pass


FakeAltBackend.__module__ = "keyrings.alt.file"


class _Unusable:
    def __get__(self, obj: object, owner: type) -> float:
        raise RuntimeError("The Secret Service daemon is neither running nor activatable")


class FakeUnusableBackend(FakeBackend):
    priority = _Unusable()


# --- which backends qualify ----------------------------------------------------------


def test_a_recommended_backend_qualifies() -> None:
    assert backend_problem(FakeBackend()) is None
    assert PasswordVault(FakeBackend()).available()


@pytest.mark.parametrize(
    ("backend", "expected"),
    [
        (fail.Keyring(), "no keyring backend is available"),
        (null.Keyring(), "no keyring backend is available"),
        (FakePlaintextKeyring(), "is not an encrypted desktop keyring"),
        (FakeAltBackend(), "is not an encrypted desktop keyring"),
        (FakeLowPriorityBackend(), "is not recommended by keyring (priority 0.5)"),
        (FakeUnusableBackend(), "is not usable: RuntimeError: The Secret Service daemon"),
    ],
)
def test_unsuitable_backends_are_refused(backend: Any, expected: str) -> None:
    problem = backend_problem(backend)
    assert problem is not None
    assert expected in problem
    vault = PasswordVault(backend)
    assert not vault.available()
    assert vault.unavailable_reason() == problem
    assert vault.get("alice", "laptop") is None
    assert not vault.store("alice", "laptop", PASSWORD)
    assert not vault.delete("alice", "laptop")
    if isinstance(backend, FakeBackend):
        assert backend.entries == {}
        assert backend.calls == []  # never even asked


def test_a_chainer_qualifies_only_if_every_member_does(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(chainer.ChainerBackend, "backends", [FakeBackend(), FakeBackend()])
    assert backend_problem(chainer.ChainerBackend()) is None
    monkeypatch.setattr(chainer.ChainerBackend, "backends", [FakeBackend(), FakePlaintextKeyring()])
    assert "not an encrypted desktop keyring" in (backend_problem(chainer.ChainerBackend()) or "")
    monkeypatch.setattr(chainer.ChainerBackend, "backends", [])
    assert backend_problem(chainer.ChainerBackend()) == "no keyring backend is available"


def test_the_default_backend_comes_from_keyring_lazily(monkeypatch: pytest.MonkeyPatch) -> None:
    resolved: list[FakeBackend] = []

    def get_keyring() -> FakeBackend:
        resolved.append(FakeBackend())
        return resolved[-1]

    monkeypatch.setattr(keyring, "get_keyring", get_keyring)
    vault = PasswordVault()
    assert resolved == []  # nothing at construction
    assert vault.available()
    assert vault.available()
    assert len(resolved) == 1  # cached
    assert vault.available(refresh=True)
    assert len(resolved) == 2
    assert vault.store("alice", "laptop", PASSWORD)
    assert resolved[-1].entries == {(SERVICE, "alice@laptop"): PASSWORD}


def test_a_keyring_that_cannot_load_is_unavailable(monkeypatch: pytest.MonkeyPatch) -> None:
    def get_keyring() -> None:
        raise KeyringError("config file broken")

    monkeypatch.setattr(keyring, "get_keyring", get_keyring)
    vault = PasswordVault()
    assert not vault.available()
    assert "could not be loaded" in (vault.unavailable_reason() or "")
    assert vault.get("alice", "laptop") is None


# --- the happy path --------------------------------------------------------------------------


def test_round_trip_uses_service_and_user_at_host() -> None:
    backend = FakeBackend()
    vault = PasswordVault(backend)
    assert vault.get("alice", "laptop") is None
    assert vault.store("alice", "laptop", PASSWORD)
    assert backend.entries == {("ollie-tray-sudo", "alice@laptop"): PASSWORD}
    assert vault.get("alice", "laptop") == PASSWORD
    assert vault.get("alice", "server") is None
    assert vault.delete("alice", "laptop")
    assert vault.get("alice", "laptop") is None
    assert not vault.delete("alice", "laptop")


def test_delete_removes_duplicates_within_reason() -> None:
    class FakeDuplicates(FakeBackend):
        def __init__(self) -> None:
            super().__init__()
            self.copies = 3

        def delete_password(self, service: str, username: str) -> None:
            if not self.copies:
                raise PasswordDeleteError("No such password!")
            self.copies -= 1

    backend = FakeDuplicates()
    assert PasswordVault(backend).delete("alice", "laptop")
    assert backend.copies == 0


def test_async_wrappers_run_in_a_worker_thread() -> None:
    threads: list[threading.Thread] = []

    class FakeThreadRecording(FakeBackend):
        def get_password(self, service: str, username: str) -> str | None:
            threads.append(threading.current_thread())
            return super().get_password(service, username)

    vault = PasswordVault(FakeThreadRecording())

    async def main() -> None:
        assert await vault.available_async()
        assert await vault.store_async("alice", "laptop", PASSWORD)
        assert await vault.get_async("alice", "laptop") == PASSWORD
        assert await vault.delete_async("alice", "laptop")
        assert await vault.get_async("alice", "laptop") is None

    asyncio.run(main())
    assert threads
    assert all(t is not threading.main_thread() for t in threads)


def test_empty_or_ambiguous_keys_and_empty_passwords_are_refused() -> None:
    backend = FakeBackend()
    vault = PasswordVault(backend)
    assert not vault.store("alice", "laptop", "")
    assert not vault.store("", "laptop", PASSWORD)
    assert not vault.store("alice", "", PASSWORD)
    assert not vault.store("al@ice", "laptop", PASSWORD)
    assert vault.get("", "laptop") is None
    assert not vault.delete("alice", "")
    assert backend.calls == []


def test_an_empty_stored_value_counts_as_none() -> None:
    backend = FakeBackend()
    backend.entries[(SERVICE, "alice@laptop")] = ""
    assert PasswordVault(backend).get("alice", "laptop") is None


# --- failures ---------------------------------------------------------------------------------


ERRORS = [
    KeyringLocked("Failed to unlock the collection!"),
    KeyringError("generic keyring failure"),
    RuntimeError("org.freedesktop.DBus.Error.NoReply"),
    OSError(111, "Connection refused"),
    UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte"),
]


@pytest.mark.parametrize("error", ERRORS, ids=lambda e: type(e).__name__)
def test_every_failure_means_no_stored_password(
    error: BaseException, caplog: pytest.LogCaptureFixture
) -> None:
    vault = PasswordVault(FakeRaisingBackend(error))
    with caplog.at_level(logging.DEBUG, logger="ollie_tray.secret_store"):
        assert vault.get("alice", "laptop") is None
        assert vault.store("alice", "laptop", PASSWORD) is False
        assert vault.delete("alice", "laptop") is False
    assert type(error).__name__ in caplog.text
    assert "alice@laptop" in caplog.text
    assert PASSWORD not in caplog.text


def test_async_failures_mean_no_stored_password() -> None:
    vault = PasswordVault(FakeRaisingBackend(KeyringLocked("locked")))

    async def main() -> None:
        assert await vault.get_async("alice", "laptop") is None
        assert await vault.store_async("alice", "laptop", PASSWORD) is False
        assert await vault.delete_async("alice", "laptop") is False

    asyncio.run(main())


def test_an_error_that_echoes_the_password_is_not_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    vault = PasswordVault(FakeRaisingBackend(ValueError(f"cannot store {PASSWORD!r}")))
    with caplog.at_level(logging.DEBUG):
        assert not vault.store("alice", "laptop", PASSWORD)
    assert "ValueError" in caplog.text
    for record in caplog.records:
        assert PASSWORD not in record.getMessage()
        assert record.exc_info is None


def test_success_paths_do_not_log_the_password(caplog: pytest.LogCaptureFixture) -> None:
    vault = PasswordVault(FakeBackend())
    with caplog.at_level(logging.DEBUG):
        vault.available()
        vault.store("alice", "laptop", PASSWORD)
        vault.get("alice", "laptop")
        vault.delete("alice", "laptop")
    assert caplog.records
    assert PASSWORD not in caplog.text


def test_a_slow_backend_call_does_not_block_the_availability_check() -> None:
    """The GUI asks ``available()`` while a worker may wait on an unlock prompt."""
    entered = threading.Event()
    release = threading.Event()

    class FakeWaitingForUnlock(FakeBackend):
        def get_password(self, service: str, username: str) -> str | None:
            entered.set()
            release.wait(10)
            return None

    vault = PasswordVault(FakeWaitingForUnlock())
    assert vault.available()
    worker = threading.Thread(target=vault.get, args=("alice", "laptop"))
    worker.start()
    try:
        assert entered.wait(10)
        assert vault.available()  # answers at once
    finally:
        release.set()
        worker.join(10)
