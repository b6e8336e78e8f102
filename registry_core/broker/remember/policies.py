"""Remembered elevation decisions: the live :class:`PolicyStore`.

A person's answer can stand for this request only (``once``, never stored),
for the broker's lifetime (``session``, kept in this store's memory only),
15 minutes, 1 hour or always (allows, in ``policies.yaml``), or be a
``deny_always``.  Policies are per tool x kind (``sandbox`` escape /
``sudo``) x host: one for ``laptop`` never matches ``build-server``.  An
allow is bound to the executable's path and sha256 (a changed file asks
again); a deny applies whatever the executable.  The file format and its
"nothing is lost" rules are in :mod:`registry_core.broker.remember.policy_file`.

A new decision replaces every older policy of its (tool, kind, host), in
memory and in the file.

Live edits: before each lookup or listing the store compares the file's
(mtime_ns, size, inode) with what it last read and reloads when they
differ, so edits by ``ollie-tools policy`` or by hand are seen.  Lookups
never take the file lock (the broker's hot path stays lock-free).

Writes are cross-process safe: every change (remember, set, revoke, change
duration) holds an exclusive ``flock`` on ``policies.yaml.lock`` (see
:mod:`registry_core.file_lock`) across reading the file afresh, changing it
and renaming the new version into place, so the broker, the tray and
``ollie-tools policy`` never lose each other's rules.  A lock that cannot be
taken within ``lock_timeout`` seconds, or a file changed behind the lock's
back by a writer that does not take it, is a :class:`PolicyError`: a lost
write is never a silent success.

Expiry: a time-limited allow ends when the wall clock passes its
``expires`` *or* when its remaining lifetime (never more than its stated
duration), measured on the monotonic clock from when this process first saw
it, has passed, whichever comes first: a wall clock stepped back keeps no
allow alive longer than it was given.

The file is read without following a symbolic link and without blocking on
a FIFO or device (:mod:`registry_core.safe_open`): anything but a regular
file is reported by name, no file policies apply, and writes are refused.

Problems (corrupt file, bad entries, failed writes) go to
:attr:`PolicyStore.problems` and to ``on_problem`` (called outside the lock;
without one they are logged).  Threading: every public method takes one
re-entrant lock (the tray's GUI thread edits while the broker looks up).
"""

from __future__ import annotations

import builtins
import contextlib
import hashlib
import logging
import math
import os
import stat
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from registry_core.broker.question import Remember
from registry_core.broker.remember.policy_file import (
    DURATIONS,
    DocumentError,
    Policy,
    PolicyKey,
    move_aside,
    parse_document,
    render_document,
    write_atomic,
)
from registry_core.broker.wire.messages import Decision, Kind
from registry_core.errors import PolicyError
from registry_core.file_lock import DEFAULT_TIMEOUT, LockTimeoutError, exclusive, lock_path_for
from registry_core.safe_open import open_regular

__all__ = ["Policy", "PolicyStore", "file_sha256"]

_log = logging.getLogger(__name__)
_CHUNK = 1 << 20
_Stamp = tuple[int, int, int]


def file_sha256(path: str | os.PathLike[str]) -> str | None:
    """The sha256 of a regular file, streamed; ``None`` when it cannot be read."""
    try:
        fd = open_for_hashing(path)
    except OSError:
        return None
    try:
        return fd_sha256(fd)
    finally:
        os.close(fd)


def open_for_hashing(path: str | os.PathLike[str]) -> int:
    """A read-only descriptor for :func:`fd_sha256`; raises ``OSError``."""
    # O_NONBLOCK: a FIFO named like a tool must not hang the broker.
    return os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)


def fd_sha256(fd: int) -> str | None:
    """The sha256 of the regular file open on ``fd`` (from its current offset to the
    end), streamed; ``None`` for anything but a regular file or when reading fails."""
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        digest = hashlib.sha256()
        while chunk := os.read(fd, _CHUNK):
            digest.update(chunk)
        return digest.hexdigest()
    except OSError:
        return None


def _policy(
    key: PolicyKey,
    remember: Remember,
    created: float,
    now: float,
    executable: str | None,
    sha256: str | None,
) -> Policy:
    """A policy for ``remember`` chosen at ``now`` (whole seconds: the file stays readable)."""
    created, now = float(math.floor(created)), float(math.floor(now))
    duration = DURATIONS.get(remember)
    decision = Decision.DENY if remember is Remember.DENY_ALWAYS else Decision.ALLOW
    expires = None if duration is None else now + duration
    return Policy(*key, decision, remember, created, expires, executable, sha256)


def _stamp(st: os.stat_result) -> _Stamp:
    return (st.st_mtime_ns, st.st_size, st.st_ino)


def _read_fd(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, _CHUNK):
        chunks.append(chunk)
    return b"".join(chunks)


def _read_bytes(path: Path) -> bytes | None:
    with contextlib.suppress(OSError):
        fd = open_regular(path)
        try:
            return _read_fd(fd)
        finally:
            os.close(fd)
    return None


def _distrust(st: os.stat_result) -> str | None:
    """Why a file of this status is not trusted for allows, or ``None``.

    Trusted: owned by us (or root) and not writable by group or others.
    """
    mode = stat.S_IMODE(st.st_mode)
    if st.st_uid not in (os.getuid(), 0):
        return f"owned by uid {st.st_uid}, not by you (uid {os.getuid()})"
    who = [name for bit, name in ((0o020, "its group"), (0o002, "every user")) if mode & bit]
    return f"writable by {' and '.join(who)} (mode {mode:04o})" if who else None


class PolicyStore:
    """Remembered policies: ``policies.yaml`` plus this instance's session policies."""

    def __init__(
        self,
        path: Path,
        clock: Callable[[], float] = time.time,
        on_problem: Callable[[str], None] | None = None,
        *,
        monotonic: Callable[[], float] = time.monotonic,
        lock_timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        self._path = Path(path)
        self._fspath = os.fspath(self._path)  # what the per-decision lstat takes
        self.problems: list[str] = []
        self._clock = clock
        self._monotonic = monotonic
        self._lock_timeout = lock_timeout
        self._deadlines: dict[Policy, float] = {}
        self._on_problem = on_problem
        self._lock = threading.RLock()
        # Placeholders until the first _refresh (every public method starts with one).
        self._file: list[Policy] = []
        self._by_key: dict[PolicyKey, builtins.list[Policy]] = {}  # _file, by key
        self._session: dict[PolicyKey, Policy] = {}
        self._rejected: list[Any] = []
        self._extra: dict[str, Any] | None = None
        self._stamp: _Stamp | None = None
        self._loaded = False
        self._write_block: str | None = None
        self._unreported: list[str] = []

    @property
    def path(self) -> Path:
        """The policy file (fixed: its text is kept for the lstat of every decision)."""
        return self._path

    def lookup(
        self,
        tool: str,
        kind: Kind | str,
        host: str,
        executable: str | os.PathLike[str] | None,
        sha256: str | None,
    ) -> Policy | None:
        """The policy deciding this request, or ``None`` (ask the person).

        A deny for the key wins; else an allow bound to this executable path
        and sha256.  Expired policies never match.
        """
        exe = os.fspath(executable) if executable is not None else None
        key = (tool, kind if type(kind) is Kind else Kind(kind), host)
        # The hot path of every decision: the plain lock and a stat, no file lock.
        with self._lock:
            self._refresh()
            candidates = self._active(key)
            pending, self._unreported = self._unreported, []
        self._report(pending)
        found = None
        for policy in candidates:
            if policy.matches(exe, sha256):
                if policy.decision is Decision.DENY:
                    return policy  # a deny for the key wins
                found = found or policy
        return found

    def list(self, include_expired: bool = False) -> builtins.list[Policy]:
        """Session and file policies, sorted by tool, kind, host."""
        now = self._clock()
        with self._transaction():
            found = [*self._session.values(), *self._file]
            if not include_expired:
                found = [p for p in found if not self._expired(p, now)]
        return sorted(found, key=lambda p: (p.tool, p.kind.value, p.host, p.created))

    def refresh(self) -> None:
        """Read the file now if it changed (lookups and listings do this themselves)."""
        with self._transaction():
            pass

    # --- changes --------------------------------------------------------------------

    def remember(
        self,
        tool: str,
        kind: Kind | str,
        host: str,
        remember: Remember,
        executable: str | os.PathLike[str] | None,
        sha256: str | None,
    ) -> Policy | None:
        """Record a person's choice; returns the policy now in effect (``None`` for once).

        Never raises for the broker's sake: an allow that cannot be bound
        (no executable or sha256) is not remembered, and a policy that cannot
        be saved is kept for this session; both are reported as problems.
        """
        if remember is Remember.ONCE:
            return None
        now = self._clock()
        exe = os.fspath(executable) if executable is not None else None
        sha = sha256.lower() if sha256 else None
        policy = _policy((tool, Kind(kind), host), remember, now, now, exe, sha)
        problem = policy.problem()
        if problem:
            self._report([f"not remembered ({policy.describe()}): {problem}"])
            return None
        try:
            self.set(policy)
        except PolicyError as exc:
            with self._transaction():
                self._session[policy.key] = policy
                self._problem(f"{exc}; {policy.describe()} is kept for this session only")
        return policy

    def set(self, policy: Policy) -> None:
        """Store ``policy``, replacing every policy of its (tool, kind, host).

        Raises :class:`PolicyError` when the policy is invalid or the file
        cannot be written (nothing changes then).
        """
        problem = policy.problem()
        if problem:
            raise PolicyError(f"invalid policy for {policy.tool}: {problem}")
        with self._transaction(write=True):
            self._set_locked(policy)

    def revoke(self, tool: str, kind: Kind | str | None = None, host: str | None = None) -> int:
        """Forget the policies of ``tool`` (of one kind / host when given); how many were active."""

        def hit(p: Policy) -> bool:  # Kind is a StrEnum: "sudo" == Kind.SUDO
            return p.tool == tool and kind in (None, p.kind) and host in (None, p.host)

        with self._transaction(write=True):
            return self._remove_locked(hit)

    def revoke_all(self) -> int:
        """Forget every policy (rejected entries stay in the file); how many were active."""
        with self._transaction(write=True):
            return self._remove_locked(lambda _p: True)

    def change_duration(
        self, tool: str, kind: Kind | str, host: str, remember: Remember
    ) -> Policy | None:
        """Give the active policy of this key a new remember choice (from now on).

        ``once`` revokes it; ``deny_always`` turns it into a deny; an allow
        choice turns a deny into an allow only when it recorded an
        executable and sha256.  Raises :class:`PolicyError` when the key has
        no active policy or the result is invalid.
        """
        key = (tool, Kind(kind), host)
        with self._transaction(write=True):
            active = self._active(key)
            if not active:
                raise PolicyError(f"no remembered policy for {tool} ({key[1].value}) on {host}")
            denies = [p for p in active if p.decision is Decision.DENY]
            current = denies[0] if denies else max(active, key=lambda p: p.created)
            if remember is Remember.ONCE:
                self._remove_locked(lambda p: p.key == key)
                return None
            now = self._clock()  # a new choice starts now: expires - created is its duration
            policy = _policy(key, remember, now, now, current.executable, current.sha256)
            problem = policy.problem()
            if problem:
                raise PolicyError(f"cannot change {current.describe()}: {problem}")
            self._set_locked(policy)
            return policy

    # --- internals ----------------------------------------------------------------

    @contextlib.contextmanager
    def _transaction(self, write: bool = False) -> Iterator[None]:
        """Hold the lock with a fresh view of the file; report problems after unlocking.

        With ``write``, also hold the cross-process file lock and read the
        file afresh whatever its stamp says (a stamp can repeat when an inode
        is reused within the filesystem's timestamp granularity).
        """
        pending: list[str] = []
        try:
            with self._lock:
                try:
                    if write:
                        with self._file_lock():
                            self._loaded = False
                            self._refresh()
                            yield
                    else:
                        self._refresh()
                        yield
                finally:
                    pending, self._unreported = self._unreported, []
        finally:
            self._report(pending)

    @contextlib.contextmanager
    def _file_lock(self) -> Iterator[None]:
        lock_file = lock_path_for(self.path)
        try:
            with exclusive(lock_file, self._lock_timeout):
                yield
        except LockTimeoutError as exc:
            raise PolicyError(f"not changing {self.path}: {exc}") from exc
        except OSError as exc:
            reason = f"cannot lock {lock_file}: {exc.strerror or exc}"
            raise PolicyError(f"cannot write {self.path}: {reason}") from exc

    def _expired(self, policy: Policy, now: float) -> bool:
        """Expired on the wall clock, or on the monotonic clock since first seen."""
        if policy.expires is None:
            return False
        if policy.expired(now):
            return True
        mono = self._monotonic()
        deadline = self._deadlines.get(policy)
        if deadline is None:
            remaining = policy.expires - now
            stated = DURATIONS.get(policy.remember)
            if stated is not None:
                remaining = min(remaining, stated)
            deadline = self._deadlines[policy] = mono + remaining
        return mono >= deadline

    def _problem(self, message: str) -> None:
        self._unreported.append(message)  # reported once the lock is released

    def _report(self, messages: builtins.list[str]) -> None:
        for message in messages:
            self.problems.append(message)
            if self._on_problem is None:
                _log.warning("%s", message)
            else:
                try:
                    self._on_problem(message)
                except Exception:  # a broken listener must not break decisions
                    _log.exception("on_problem callback failed")

    def _active(self, key: PolicyKey) -> builtins.list[Policy]:
        now = self._clock()
        found = list(self._by_key.get(key, ()))
        session = self._session.get(key)
        if session is not None:
            found.insert(0, session)
        return [p for p in found if not self._expired(p, now)]

    def _set_locked(self, policy: Policy) -> None:
        in_file = any(p.key == policy.key for p in self._file)
        if policy.remember is Remember.SESSION:
            if in_file:
                self._write([p for p in self._file if p.key != policy.key])
            self._session[policy.key] = policy
            return
        self._write([*(p for p in self._file if p.key != policy.key), policy])
        self._session.pop(policy.key, None)

    def _remove_locked(self, hit: Callable[[Policy], bool]) -> int:
        now = self._clock()
        gone_session = [k for k, p in self._session.items() if hit(p)]
        gone_file = [p for p in self._file if hit(p)]
        if gone_file:
            self._write([p for p in self._file if not hit(p)])
        count = sum(not self._expired(self._session[k], now) for k in gone_session)
        for k in gone_session:
            del self._session[k]
        return count + sum(not self._expired(p, now) for p in gone_file)

    def _refresh(self) -> None:
        """Reload the file when its (mtime_ns, size, inode) changed."""
        try:
            st = os.lstat(self._fspath)
        except (FileNotFoundError, NotADirectoryError):
            self._clear()
        except OSError as exc:
            self._clear(None, f"cannot read {self.path}: {exc.strerror or exc}")
        else:
            if not self._loaded or _stamp(st) != self._stamp:
                self._load(_stamp(st))

    def _replace_state(
        self,
        policies: builtins.list[Policy],
        rejected: builtins.list[Any],
        extra: dict[str, Any] | None,
        stamp: _Stamp | None,
    ) -> None:
        self._file, self._rejected, self._extra = policies, rejected, extra
        self._by_key = {}
        for policy in policies:
            self._by_key.setdefault(policy.key, []).append(policy)
        self._stamp, self._loaded, self._write_block = stamp, True, None
        live = {*policies, *self._session.values()}
        self._deadlines = {p: d for p, d in self._deadlines.items() if p in live}

    def _clear(self, stamp: _Stamp | None = None, block: str | None = None) -> None:
        """No file policies; with ``block``, fail closed: no writes that could destroy the file."""
        if block is not None and block != self._write_block:
            self._problem(block + "; remembered policies are not applied")
        self._replace_state([], [], None, stamp)
        self._write_block = block

    def _load(self, seen: _Stamp) -> None:
        now = self._clock()
        try:
            fd = open_regular(self.path)
            try:
                st = os.fstat(fd)
                data = _read_fd(fd)
            finally:
                os.close(fd)
        except FileNotFoundError:
            self._clear()
            return
        except OSError as exc:
            self._clear(seen, f"cannot read {self.path}: {exc.strerror or exc}")
            return
        try:
            distrust = _distrust(st)
            doc = parse_document(
                data, self.path, now, trusted=distrust is None, distrust=distrust or ""
            )
        except DocumentError as exc:
            if _read_bytes(self.path) != data:  # being rewritten in place: look again later
                self._clear()
            else:
                self._set_aside(_stamp(st), str(exc), now)
            return
        if distrust is not None:
            self._problem(f"{self.path}: {distrust}: only its denies apply")
        for message in doc.problems:
            self._problem(message)
        self._replace_state(
            list(doc.policies), list(doc.rejected), dict(doc.extra or {}) or None, _stamp(st)
        )

    def _set_aside(self, stamp: _Stamp, problem: str, now: float) -> None:
        try:
            target = move_aside(self.path, now)
        except OSError as exc:
            reason = exc.strerror or str(exc)
            self._clear(stamp, f"{self.path}: {problem}; could not move it aside: {reason}")
            return
        self._problem(
            f"{self.path}: {problem}; moved aside to {target}; starting with no remembered policies"
        )
        self._clear()

    def _write(self, policies: builtins.list[Policy]) -> None:
        """Write ``policies`` (expired ones pruned) and adopt them; raises PolicyError."""
        if self._write_block is not None:
            raise PolicyError(f"not changing {self.path}: {self._write_block}")
        now = self._clock()
        kept = [p for p in policies if not self._expired(p, now)]
        text = render_document(kept, self._rejected, self._extra)
        try:
            current: _Stamp | None = _stamp(os.lstat(self.path))
        except FileNotFoundError:
            current = None
        except OSError as exc:
            raise PolicyError(f"cannot write {self.path}: {exc.strerror or exc}") from exc
        if current != self._stamp:  # a writer that does not take the lock changed it
            raise PolicyError(
                f"not changing {self.path}: it changed while being read (another program "
                "wrote it without taking its lock); nothing was written, try again"
            )
        write_atomic(self.path, text)
        try:
            stamp: _Stamp | None = _stamp(os.lstat(self.path))
        except OSError:
            stamp = None
        self._replace_state(kept, self._rejected, self._extra, stamp)
