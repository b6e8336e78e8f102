"""The remembered-policy record and its file, ``$XDG_CONFIG_HOME/ollie/policies.yaml``.

:class:`Policy` is one remembered decision; this module parses, renders,
atomically replaces and moves aside the file.  The live store is
:mod:`registry_core.broker.remember.policies`.

File format (version 1): a YAML mapping, written by the broker, the tray
and ``ollie-tools policy``, safe to edit by hand (a running broker notices)::

    version: 1
    policies:
    - tool: system_logs          # tool name, as in the registry
      kind: sudo                 # sandbox (run outside Landlock) | sudo (run as root)
      host: laptop               # host the tool runs on (the broker's hostname by default)
      decision: allow            # allow | deny
      remember: 1h               # 15m | 1h | always (allow); deny_always (deny)
      created: '2025-05-04T12:00:00Z'
      expires: '2025-05-04T13:00:00Z'   # null: never
      executable: /home/me/.config/ollie/tools/system_logs_journald
      sha256: 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08
    rejected: []                 # entries that could not be used, kept verbatim

* ``version`` must be ``1`` (missing: assumed 1, with a warning).
* Entries need ``tool``, ``kind``, ``host``, ``decision``, ``remember`` and
  ``created``; ``expires`` defaults to ``null``.  ``decision: allow`` needs
  ``remember`` 15m, 1h or always, an absolute ``executable`` and its
  lowercase hex ``sha256``: it applies only while that path has that hash
  (a changed or moved executable asks again).  ``decision: deny`` needs
  ``remember: deny_always`` and applies whatever the executable
  (``executable``/``sha256`` are then informational).  15m and 1h need an
  ``expires``; any entry may have one.  Times are ISO-8601, UTC without an
  offset.  ``once`` and ``session`` are never stored (a session policy
  lives in the broker's memory only).
* An unknown key inside an entry makes it invalid (a misspelt ``expires``
  must not mean "forever"); unknown top-level keys are kept, with a warning.
* Several entries for one (tool, kind, host) can exist after a hand edit:
  a deny wins, else any matching allow.  Writing a policy replaces every
  entry of its (tool, kind, host).  Expired entries are ignored and dropped
  at the next write.

Nothing is lost:

* A file that cannot be used at all (not YAML, not a mapping, another
  ``version``, ``policies``/``rejected`` not lists) is renamed to
  ``policies.yaml.corrupt-YYYYmmddTHHMMSS`` (UTC; ``-2``, ``-3``... if taken,
  never overwritten), reported, and the store starts empty (fail closed).
* An invalid entry is skipped with a warning naming its index
  (``policies[3]``, 0-based) and field; the file stays as it is until the
  next write, which moves the entry verbatim under ``rejected:`` as
  ``{problem, rejected, entry}``.  ``rejected:`` items are never applied and
  always kept; to revive one, fix it and move it back under ``policies:``.
* A file owned by another user (except root) or writable by group/others
  is not trusted for allows: its denies apply; its allows are not applied
  and move under ``rejected:`` at the next write.
* Times must be plausible: an entry ``created`` more than
  :data:`CLOCK_SKEW` seconds in the future, or a 15m/1h allow whose
  ``expires - created`` exceeds its stated duration, is rejected (a hand
  edit or a clock stepped back must not stretch an allow).

Writes go to a temporary file in the same directory (mode 0600), are
fsync'ed and renamed over ``policies.yaml``; the directory is created 0700.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import functools
import os
import re
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from registry_core.broker.question import Remember
from registry_core.broker.wire.messages import Decision, Kind
from registry_core.errors import PolicyError
from registry_core.registry.meta import tool_name_error

FORMAT_VERSION = 1
DURATIONS: Mapping[Remember, float] = {Remember.MINUTES_15: 15 * 60.0, Remember.HOUR: 3600.0}
"""Lifetime in seconds of the time-limited choices."""
CLOCK_SKEW = 60.0
"""Seconds an entry's ``created`` may lie in the future (clocks of hosts sharing a home)."""

_SHA256_RE = re.compile(r"[0-9a-f]{64}")
_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f]")
_REQUIRED = ("tool", "kind", "host", "decision", "remember", "created")
_KNOWN = frozenset((*_REQUIRED, "expires", "executable", "sha256"))
_HEADER = (
    "# Ollie remembered elevation policies: see docs/security.md for the format.\n"
    "# Written by ollie-tray / ollie-tools policy; hand edits are picked up live.\n"
)
_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_Dumper: Any = getattr(yaml, "CSafeDumper", yaml.SafeDumper)

PolicyKey = tuple[str, Kind, str]


def iso_time(ts: float) -> str:
    """``ts`` (epoch seconds) as ISO-8601 UTC with a ``Z``; microseconds only when present."""
    when = dt.datetime.fromtimestamp(ts, dt.UTC)
    spec = "seconds" if when.microsecond == 0 else "microseconds"
    return when.isoformat(timespec=spec).replace("+00:00", "Z")


def parse_time(value: object) -> float:
    """An ISO-8601 string (or a YAML timestamp) as epoch seconds; naive means UTC."""
    if isinstance(value, str):
        try:
            when = dt.datetime.fromisoformat(value.strip())
        except ValueError:
            raise ValueError(f"not an ISO-8601 date and time: {value!r}") from None
    elif isinstance(value, dt.datetime):
        when = value
    else:
        raise ValueError(f"must be an ISO-8601 date and time, got {_type(value)}")
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return when.timestamp()


@dataclass(frozen=True)
class Policy:
    """One remembered decision for ``tool`` x ``kind`` x ``host``.

    Times are epoch seconds.  An allow is bound to ``executable`` and
    ``sha256``; a deny applies to any executable.
    """

    tool: str
    kind: Kind
    host: str
    decision: Decision
    remember: Remember
    created: float
    expires: float | None = None
    executable: str | None = None
    sha256: str | None = None

    @property
    def key(self) -> PolicyKey:
        return (self.tool, self.kind, self.host)

    def expired(self, now: float) -> bool:
        return self.expires is not None and now >= self.expires

    def matches(self, executable: str | None, sha256: str | None) -> bool:
        """Whether this policy applies to a request for ``executable`` with ``sha256``."""
        if self.decision is Decision.DENY:
            return True
        if executable is None or sha256 is None or self.sha256 is None:
            return False
        return self.executable == executable and self.sha256 == sha256.lower()

    def describe(self) -> str:
        """One line for dialogs, audit reasons and the CLI."""
        return self._description

    @functools.cached_property
    def _description(self) -> str:  # every remembered decision's reason: made once
        text = f"{self.decision.value} {self.tool} ({self.kind.value}) on {self.host}"
        text += f", {self.remember.label.lower()}"
        if self.expires is not None:
            text += f" until {iso_time(self.expires)}"
        if self.decision is Decision.ALLOW and self.executable:
            text += f" for {self.executable} (sha256 {(self.sha256 or '')[:12]})"
        return text

    def problem(self) -> str | None:
        """What makes this policy invalid, or ``None``."""
        name_error = tool_name_error(self.tool)
        if name_error:
            return f"field 'tool': {name_error}"
        if not self.host or _CONTROL_RE.search(self.host):
            return "field 'host': must be a non-empty host name"
        if self.remember is Remember.ONCE:
            return "field 'remember': 'once' is never remembered"
        if self.remember is Remember.DENY_ALWAYS and self.decision is not Decision.DENY:
            return "field 'remember': deny_always needs decision deny"
        if self.decision is Decision.DENY:
            if self.remember not in (Remember.DENY_ALWAYS, Remember.SESSION):
                return "field 'remember': a deny is remembered as deny_always"
            return None
        if self.remember in DURATIONS and self.expires is None:
            return f"field 'expires': a {self.remember.value} allow needs an expiry time"
        if not self.executable or not os.path.isabs(self.executable):
            return "field 'executable': an allow needs the executable's absolute path"
        if self.sha256 is None or not _SHA256_RE.fullmatch(self.sha256):
            return "field 'sha256': an allow needs the executable's sha256 (64 hex digits)"
        return None

    def to_json(self) -> dict[str, Any]:
        """The file entry (also ``ollie-tools policy list --json``)."""
        return {
            "tool": self.tool,
            "kind": self.kind.value,
            "host": self.host,
            "decision": self.decision.value,
            "remember": self.remember.value,
            "created": iso_time(self.created),
            "expires": None if self.expires is None else iso_time(self.expires),
            "executable": self.executable,
            "sha256": self.sha256,
        }


class DocumentError(PolicyError):
    """The policies file cannot be used at all (it is moved aside)."""


class EntryError(PolicyError):
    """One entry of the policies file is invalid."""


def _type(value: object) -> str:
    return "null" if value is None else type(value).__name__


def _text(raw: Mapping[Any, Any], key: str, optional: bool = False) -> str | None:
    value = raw.get(key)
    if value is None and optional:
        return None
    if not isinstance(value, str) or not value:
        hint = " (quote it)" if value is not None else ""
        raise EntryError(f"field {key!r}: must be a non-empty string, got {_type(value)}{hint}")
    return value


def _choice(raw: Mapping[Any, Any], key: str, enum: Any) -> Any:
    value = _text(raw, key)
    try:
        return enum(value)
    except ValueError:
        allowed = ", ".join(str(e.value) for e in enum)
        raise EntryError(f"field {key!r}: {value!r} is not one of {allowed}") from None


def _when(raw: Mapping[Any, Any], key: str, optional: bool) -> float | None:
    value = raw.get(key)
    if value is None and optional:
        return None
    try:
        return parse_time(value)
    except ValueError as exc:
        raise EntryError(f"field {key!r}: {exc}") from None


def parse_entry(raw: object) -> Policy:
    """One ``policies`` list item as a :class:`Policy`; raises :class:`EntryError`."""
    if not isinstance(raw, Mapping):
        raise EntryError(f"must be a mapping, got {_type(raw)}")
    unknown = sorted(str(k) for k in raw if k not in _KNOWN)
    if unknown:
        raise EntryError(f"field {unknown[0]!r}: unknown key")
    for key in _REQUIRED:
        if key not in raw:
            raise EntryError(f"field {key!r}: missing")
    remember = _choice(raw, "remember", Remember)
    if remember is Remember.SESSION:
        raise EntryError("field 'remember': session policies are never stored in the file")
    sha256 = _text(raw, "sha256", optional=True)
    policy = Policy(
        tool=str(_text(raw, "tool")),
        kind=_choice(raw, "kind", Kind),
        host=str(_text(raw, "host")),
        decision=_choice(raw, "decision", Decision),
        remember=remember,
        created=_when(raw, "created", optional=False) or 0.0,
        expires=_when(raw, "expires", optional=True),
        executable=_text(raw, "executable", optional=True),
        sha256=sha256.lower() if sha256 else None,
    )
    problem = policy.problem()
    if problem:
        raise EntryError(problem)
    return policy


@dataclass(frozen=True)
class Document:
    """A parsed policies file: usable entries, rejected items and warnings."""

    policies: tuple[Policy, ...] = ()
    rejected: tuple[Any, ...] = ()  # the file's old rejected items verbatim, then new ones
    extra: Mapping[str, Any] | None = None  # unknown top-level keys, kept verbatim
    problems: tuple[str, ...] = ()


def check_times(policy: Policy, now: float) -> None:
    """Reject implausible times: ``created`` in the future, a lifetime beyond the stated one."""
    if policy.created > now + CLOCK_SKEW:
        raise EntryError(f"field 'created': {iso_time(policy.created)} is in the future")
    stated = DURATIONS.get(policy.remember)
    expires = policy.expires
    if stated is not None and expires is not None and expires - policy.created > stated:
        raise EntryError(
            f"field 'expires': {iso_time(expires)} is more than "
            f"{policy.remember.value} after 'created' ({iso_time(policy.created)})"
        )


def parse_document(
    data: bytes, path: Path, now: float, trusted: bool = True, distrust: str = ""
) -> Document:
    """Parse the file's bytes; raises :class:`DocumentError` when nothing is usable.

    Untrusted files (owned by another user, writable by group or others:
    ``distrust`` says which) contribute their denies only; their allows
    become rejected items.
    """
    try:
        doc = yaml.load(data, Loader=_Loader)  # noqa: S506 (a safe loader)
    except yaml.YAMLError as exc:
        raise DocumentError(f"not valid YAML: {' '.join(str(exc).split())}") from exc
    except RecursionError as exc:
        raise DocumentError("not valid YAML: nested too deeply") from exc
    if doc is None:
        return Document()
    if not isinstance(doc, dict):
        raise DocumentError(f"the top level must be a mapping, got {_type(doc)}")
    problems: list[str] = []
    version = doc.get("version")
    if "version" not in doc:
        problems.append(f"{path}: no 'version' key; assuming version {FORMAT_VERSION}")
    elif version != FORMAT_VERSION or isinstance(version, bool):
        raise DocumentError(f"unsupported version {version!r} (this program reads version 1)")
    entries = [] if doc.get("policies") is None else doc["policies"]
    old_rejected = [] if doc.get("rejected") is None else doc["rejected"]
    if not isinstance(entries, list):
        raise DocumentError(f"'policies' must be a list, got {_type(entries)}")
    if not isinstance(old_rejected, list):
        raise DocumentError(f"'rejected' must be a list, got {_type(old_rejected)}")
    extra = {str(k): v for k, v in doc.items() if k not in ("version", "policies", "rejected")}
    problems += [f"{path}: unknown top-level key {k!r} (kept as is)" for k in sorted(extra)]
    if old_rejected:
        problems.append(f"{path}: {len(old_rejected)} item(s) under 'rejected:' are not applied")
    policies: list[Policy] = []
    rejected: list[Any] = list(old_rejected)
    for index, raw in enumerate(entries):
        try:
            policy = parse_entry(raw)
            check_times(policy, now)
        except EntryError as exc:
            problems.append(
                f"{path}: policies[{index}]: {exc}; entry skipped "
                "(moved under 'rejected:' at the next write)"
            )
            rejected.append({"problem": str(exc), "rejected": iso_time(now), "entry": raw})
            continue
        if not trusted and policy.decision is Decision.ALLOW:
            why = distrust or "not trusted"
            problem = f"the file was {why}; allow not applied"
            rejected.append({"problem": problem, "rejected": iso_time(now), "entry": raw})
            continue
        policies.append(policy)
    return Document(tuple(policies), tuple(rejected), extra or None, tuple(problems))


def render_document(
    policies: Sequence[Policy], rejected: Sequence[Any], extra: Mapping[str, Any] | None
) -> str:
    """The file's text for ``policies`` (plus rejected items and unknown keys, verbatim)."""
    doc: dict[str, Any] = {"version": FORMAT_VERSION, "policies": [p.to_json() for p in policies]}
    if rejected:
        doc["rejected"] = list(rejected)
    doc.update(extra or {})
    body = yaml.dump(
        doc, Dumper=_Dumper, sort_keys=False, default_flow_style=False, allow_unicode=True
    )
    return _HEADER + body


def write_atomic(path: Path, text: str) -> None:
    """Replace ``path`` with ``text``: same-directory temp file, fsync, rename; mode 0600."""
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as exc:
        raise PolicyError(f"cannot write {path}: {exc.strerror or exc}") from exc
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fchmod(fh.fileno(), 0o600)
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise PolicyError(f"cannot write {path}: {exc.strerror or exc}") from exc
    with contextlib.suppress(OSError):  # make the rename itself durable
        dir_fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


def move_aside(path: Path, now: float) -> Path:
    """Rename ``path`` to ``<name>.corrupt-YYYYmmddTHHMMSS`` (UTC), never overwriting.

    Raises ``OSError`` when it cannot be moved.
    """
    stamp = dt.datetime.fromtimestamp(now, dt.UTC).strftime("%Y%m%dT%H%M%S")
    base = path.with_name(f"{path.name}.corrupt-{stamp}")
    for n in range(1, 1000):
        target = base if n == 1 else base.with_name(f"{base.name}-{n}")
        try:
            # link + unlink: unlike rename, link refuses to replace an existing file.
            os.link(path, target)
        except FileExistsError:
            continue
        except OSError:
            if target.exists():
                continue
            os.rename(path, target)  # a filesystem without hard links
            return target
        if os.stat(path).st_ino == os.stat(target).st_ino:
            os.unlink(path)  # else a writer replaced it meanwhile: keep the new file
        return target
    raise FileExistsError(f"too many corrupt copies of {path}")
