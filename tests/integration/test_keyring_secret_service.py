"""PasswordVault against a real Secret Service (gnome-keyring on a private session bus).

keyring's SecretService backend (through secretstorage/jeepney) connects to
``$DBUS_SESSION_BUS_ADDRESS`` at every call, so the tests point that variable
at the private bus and pass ``keyring.backends.SecretService.Keyring()`` to the
vault explicitly: nothing depends on the backend keyring would pick for the
person running the tests, nor on their keyring config.  One test runs the
default resolution (``PasswordVault()``) in a child process with the private
session's environment, the way the tray does it.
"""

from __future__ import annotations

import asyncio
import gc
import json
import logging
import subprocess
import sys
import warnings
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import desktop_session as ds
import pytest
import secretstorage
from keyring.backends import SecretService, fail

from ollie_tray.secret_store import SERVICE, PasswordVault

pytestmark = pytest.mark.realstack

PASSWORD = "correct horse battery staple"
KEYRING_PASSWORD = "unlock-the-login-keyring"


@pytest.fixture
def session(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    with ds.dbus_session(tmp_path) as env, ds.gnome_keyring(env, tmp_path, KEYRING_PASSWORD):
        monkeypatch.setenv("DBUS_SESSION_BUS_ADDRESS", env["DBUS_SESSION_BUS_ADDRESS"])
        yield env


def vault() -> PasswordVault:
    return PasswordVault(SecretService.Keyring())


def test_store_get_delete_round_trip(session: dict[str, str]) -> None:
    v = vault()
    assert v.available()
    assert v.unavailable_reason() is None
    assert v.get("alice", "buildhost") is None
    assert v.store("alice", "buildhost", PASSWORD)
    assert v.get("alice", "buildhost") == PASSWORD
    assert v.get("alice", "otherhost") is None
    assert v.get("bob", "buildhost") is None
    assert v.store("alice", "buildhost", "second")  # replaces, no duplicate
    assert v.get("alice", "buildhost") == "second"
    assert v.delete("alice", "buildhost")
    assert v.get("alice", "buildhost") is None
    assert not v.delete("alice", "buildhost")


def test_the_entry_names_service_and_user_at_host_but_not_the_secret(
    session: dict[str, str],
) -> None:
    assert vault().store("alice", "buildhost", PASSWORD)
    with closing(secretstorage.dbus_init()) as connection:
        collection = secretstorage.get_default_collection(connection)
        items = list(collection.search_items({"service": SERVICE}))
        assert len(items) == 1
        (item,) = items
        assert item.get_attributes()["username"] == "alice@buildhost"
        assert PASSWORD not in item.get_label()
        assert item.get_secret() == PASSWORD.encode()


def test_async_wrappers_and_the_wrong_password_flow(session: dict[str, str]) -> None:
    """Stored, reused, rejected by sudo: deleted, so the person is asked again."""

    async def main() -> None:
        v = vault()
        assert await v.available_async()
        assert await v.store_async("alice", "buildhost", "stale-password")
        assert await v.get_async("alice", "buildhost") == "stale-password"
        # sudo said "wrong password" for the stored one:
        assert await v.delete_async("alice", "buildhost")
        assert await v.get_async("alice", "buildhost") is None

    asyncio.run(main())


def test_the_secret_never_reaches_the_log(
    session: dict[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    v = vault()
    v.store("alice", "buildhost", PASSWORD)
    v.get("alice", "buildhost")
    v.delete("alice", "buildhost")
    assert caplog.records  # it did log
    assert all(PASSWORD not in r.getMessage() for r in caplog.records)


def test_a_locked_keyring_means_no_stored_password(
    session: dict[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    v = vault()
    assert v.store("alice", "buildhost", PASSWORD)
    with closing(secretstorage.dbus_init()) as connection:
        secretstorage.get_default_collection(connection).lock()
    # Unlocking needs a prompter, and this session has none: the prompt is dismissed.
    # keyring leaks its D-Bus connection when it raises KeyringLocked (a keyring bug,
    # not ours); the socket's ResourceWarning is not this test's subject.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        assert v.get("alice", "buildhost") is None
        assert not v.store("alice", "buildhost", "new")
        assert not v.delete("alice", "buildhost")
        gc.collect()
    assert "KeyringLocked" in caplog.text
    assert PASSWORD not in caplog.text


def test_fail_backend_is_not_available(session: dict[str, str]) -> None:
    v = PasswordVault(fail.Keyring())
    assert not v.available()
    assert v.unavailable_reason() == "no keyring backend is available"
    assert v.get("alice", "buildhost") is None
    assert not v.store("alice", "buildhost", PASSWORD)


def test_no_secret_service_is_not_available(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with ds.dbus_session(tmp_path) as env:
        monkeypatch.setenv("DBUS_SESSION_BUS_ADDRESS", env["DBUS_SESSION_BUS_ADDRESS"])
        v = vault()
        assert not v.available()
        assert "not usable" in (v.unavailable_reason() or "")
        assert v.get("alice", "buildhost") is None
        assert not v.store("alice", "buildhost", PASSWORD)


_CHILD = """
import json, sys
from ollie_tray.secret_store import PasswordVault
v = PasswordVault()
result = {"available": v.available(), "backend": type(v._backend).__module__}
result["stored"] = v.store("alice", "buildhost", sys.argv[1])
result["round_trip"] = v.get("alice", "buildhost") == sys.argv[1]
result["deleted"] = v.delete("alice", "buildhost")
print(json.dumps(result))
"""


def test_default_backend_resolution_finds_the_secret_service(session: dict[str, str]) -> None:
    child = subprocess.run(
        [sys.executable, "-W", "error", "-c", _CHILD, PASSWORD],
        env=session,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert child.returncode == 0, child.stderr
    assert json.loads(child.stdout) == {
        "available": True,
        "backend": "keyring.backends.SecretService",
        "stored": True,
        "round_trip": True,
        "deleted": True,
    }
