"""The sudo password in the desktop keyring, for the credential gate.

:class:`PasswordVault` keeps one password per ``user@host`` under the service
name ``ollie-tray-sudo`` through :mod:`keyring` (Secret Service on GNOME and
most desktops, KWallet on KDE).  It is used only with the person's consent
("remember in keyring", off by default) and only for requests that already
passed the elevation gate; the caller deletes a stored password that sudo
rejects.

Only a real, encrypted keyring qualifies: the ``fail`` and ``null`` backends,
anything keyring itself rates below 1 ("not recommended"), and every
``keyrings.alt`` backend (plaintext files, or files encrypted with a password
typed on a console nobody watches) are refused, also inside a chainer.

Failures never escape: a locked keyring the person will not unlock, no
backend, a D-Bus error, anything a backend raises, is logged (without the
secret: for ``store`` not even the exception's message) and means "no stored
password" (``get`` -> ``None``, ``store``/``delete`` -> ``False``).

Threading: keyring is blocking and may wait on the person (an unlock
prompt), so the GUI uses the ``*_async`` methods, which run the blocking call
in a worker thread (``asyncio.to_thread``).  A lock serialises the backend
calls of one vault.  The backend is resolved (``keyring.get_keyring()``,
which probes D-Bus) on first use, not at construction; pass ``backend`` to
pick one explicitly (tests use ``keyring.backends.SecretService.Keyring()``,
which talks to ``$DBUS_SESSION_BUS_ADDRESS`` as it is at each call).

Known keyring quirk: when the Secret Service collection stays locked,
keyring's SecretService backend raises ``KeyringLocked`` without closing its
D-Bus connection; the socket is closed when garbage-collected (a
``ResourceWarning`` under ``-W error``).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import Any

log = logging.getLogger(__name__)

SERVICE = "ollie-tray-sudo"
_MAX_DELETES = 5  # duplicates of one key are removed too, within reason
_MESSAGE_LIMIT = 200


def backend_problem(backend: Any) -> str | None:
    """Why ``backend`` must not hold a sudo password, or ``None`` if it may."""
    from keyring.backends import chainer, fail, null

    cls = type(backend)
    name = f"{cls.__module__}.{cls.__qualname__}"
    if isinstance(backend, chainer.ChainerBackend):
        members = list(backend.backends)
        if not members:
            return "no keyring backend is available"
        for member in members:
            problem = backend_problem(member)
            if problem is not None:
                return problem
        return None
    if isinstance(backend, fail.Keyring | null.Keyring):
        return "no keyring backend is available"
    if cls.__module__.startswith("keyrings.alt") or "plaintext" in cls.__qualname__.lower():
        return f"{name} is not an encrypted desktop keyring"
    try:
        priority = float(cls.priority)
    except Exception as exc:  # backends report "not usable here" by raising
        return f"{name} is not usable: {_describe(exc)}"
    if priority < 1:
        return f"{name} is not recommended by keyring (priority {priority:g})"
    return None


class PasswordVault:
    """The stored sudo passwords; see the module docstring."""

    def __init__(self, backend: Any | None = None, *, service: str = SERVICE) -> None:
        self._explicit = backend
        self._service = service
        # Two locks: checking availability must not wait behind a backend call
        # that waits on the person (an unlock prompt), the GUI asks it.
        self._check_lock = threading.Lock()
        self._op_lock = threading.Lock()
        self._backend: Any | None = None
        self._problem: str | None = "not checked yet"
        self._checked = False

    # -- availability ----------------------------------------------------------------

    def available(self, *, refresh: bool = False) -> bool:
        """Whether a real keyring can be used.

        The first call (or ``refresh=True``) resolves and probes the backend,
        which is blocking D-Bus work; later calls answer from the cache.
        """
        return self._usable(refresh=refresh) is not None

    def unavailable_reason(self) -> str | None:
        """Why :meth:`available` is ``False`` (for a tooltip), else ``None``."""
        self._usable(refresh=False)
        return self._problem

    def _usable(self, *, refresh: bool) -> Any | None:
        """The backend if it may be used, else ``None``."""
        with self._check_lock:
            if self._checked and not refresh:
                return self._backend if self._problem is None else None
            backend = self._explicit
            try:
                if backend is None:
                    import keyring

                    backend = keyring.get_keyring()
                problem = backend_problem(backend)
            except Exception as exc:
                problem = f"the keyring could not be loaded: {_describe(exc)}"
            if problem is None:
                log.debug("keyring: using %s", type(backend).__qualname__)
            elif problem != self._problem:
                log.info("keyring: not used: %s", problem)
            self._backend, self._problem, self._checked = backend, problem, True
            return backend if problem is None else None

    # -- blocking API --------------------------------------------------------------------

    def get(self, user: str, host: str) -> str | None:
        """The stored password for ``user@host``, or ``None`` (also on any failure)."""
        key = _key(user, host)
        backend = self._usable(refresh=False) if key else None
        if key is None or backend is None:
            return None
        with self._op_lock:
            try:
                value = backend.get_password(self._service, key)
            except Exception as exc:
                log.warning("keyring: could not read the entry for %s: %s", key, _describe(exc))
                return None
        if isinstance(value, str) and value:
            return value
        return None

    def store(self, user: str, host: str, password: str) -> bool:
        """Keep ``password`` for ``user@host``; ``False`` if it could not be stored."""
        key = _key(user, host)
        if key is None:
            return False
        if not isinstance(password, str) or not password:
            log.warning("keyring: refusing to store an empty entry for %s", key)
            return False
        backend = self._usable(refresh=False)
        if backend is None:
            return False
        with self._op_lock:
            try:
                backend.set_password(self._service, key, password)
            except Exception as exc:
                # Only the type: a message could, in theory, echo what was stored.
                log.warning(
                    "keyring: could not store the entry for %s (%s)", key, type(exc).__name__
                )
                return False
        log.info("keyring: stored the entry for %s", key)
        return True

    def delete(self, user: str, host: str) -> bool:
        """Forget the password for ``user@host``; ``True`` if one was removed."""
        from keyring.errors import PasswordDeleteError

        key = _key(user, host)
        backend = self._usable(refresh=False) if key else None
        if key is None or backend is None:
            return False
        deleted = False
        with self._op_lock:
            for _ in range(_MAX_DELETES):
                try:
                    backend.delete_password(self._service, key)
                except PasswordDeleteError:
                    break  # nothing (more) stored
                except Exception as exc:
                    log.warning(
                        "keyring: could not delete the entry for %s: %s", key, _describe(exc)
                    )
                    break
                deleted = True
        if deleted:
            log.info("keyring: deleted the entry for %s", key)
        return deleted

    # -- non-blocking API (worker thread) -------------------------------------------

    async def available_async(self, *, refresh: bool = False) -> bool:
        return await asyncio.to_thread(self.available, refresh=refresh)

    async def get_async(self, user: str, host: str) -> str | None:
        return await asyncio.to_thread(self.get, user, host)

    async def store_async(self, user: str, host: str, password: str) -> bool:
        return await asyncio.to_thread(self.store, user, host, password)

    async def delete_async(self, user: str, host: str) -> bool:
        return await asyncio.to_thread(self.delete, user, host)


def _key(user: str, host: str) -> str | None:
    """``user@host``, or ``None`` (logged) when that would not name one entry."""
    if not user or not host or "@" in user:
        log.warning("keyring: no entry for user %r on host %r", user, host)
        return None
    return f"{user}@{host}"


def _describe(exc: BaseException) -> str:
    text = str(exc)
    if len(text) > _MESSAGE_LIMIT:
        text = text[: _MESSAGE_LIMIT - 3] + "..."
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
