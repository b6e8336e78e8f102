"""Remembered answers to agents' own actions (``action`` requests), and what they cover.

A remembered choice is keyed by agent + agent tool + a pattern the person saw
(and may have edited) in the dialog, of one of three kinds:

- ``program``: a *simple* shell command (no operators, substitutions or
  redirections: see :func:`program_of`) whose program is the pattern;
  ``git`` covers ``git status`` but never ``git status; rm -rf ~``;
- ``path``: the file itself, or, for a pattern ending in ``/``, every file
  beneath that directory; the action's path must be a real, normal one
  (``ollie-approve`` resolves symbolic links): one with ``..``, ``.`` or
  ``//`` left in it is covered by no pattern;
- ``exact``: exactly this command (when there is one), else exactly this summary
  (a URL, a query).

A pattern is stored only when it covers the action the person answered
(:func:`covers`), so a rule is never broader than what the dialog showed.
Durations are those of tool policies (once, session, 15 min, 1 h, always,
deny always); ``session`` rules live in memory, the others in
``$XDG_CONFIG_HOME/ollie/action-policies.json``, written atomically under a
lock; a corrupt file is moved aside and reported, never silently lost.
A deny rule wins over an allow rule.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import posixpath
import shlex
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from registry_core.broker.question import ActionDetails, Remember
from registry_core.broker.remember.policy_file import DURATIONS, move_aside, write_atomic
from registry_core.broker.wire.messages import Decision, PatternKind
from registry_core.errors import OllieError, PolicyError
from registry_core.file_lock import DEFAULT_TIMEOUT, exclusive, lock_path_for

_log = logging.getLogger(__name__)
_SHELL_SPECIAL = set(";&|<>`$(){}\n\r*?[]~!#\\\"'")
FILE_VERSION = 1
RULES_FILE = "action-policies.json"
"""The file's name, beside ``policies.yaml``."""


def program_of(command: str | None) -> str | None:
    """The program of a simple command (``git`` of ``git status -s``), else ``None``.

    Anything a shell could turn into a second command or an unexpected target
    (operators, substitutions, redirections, globs, quotes, escapes, a leading
    ``VAR=value``) has no program: such a command is only ever remembered exactly.
    """
    if command is None or any(ch in _SHELL_SPECIAL for ch in command):
        return None
    try:
        words = shlex.split(command)
    except ValueError:
        return None
    if not words or "=" in words[0]:
        return None
    return words[0]


def _normal(path: str) -> str:
    return posixpath.normpath(path)


def covers(
    kind: PatternKind, pattern: str, *, summary: str, command: str | None, path: str | None
) -> bool:
    """Does the pattern cover this action?"""
    if kind is PatternKind.PROGRAM:
        return bool(pattern) and program_of(command) == pattern
    if kind is PatternKind.PATH:
        # Only a normal path: one with ``..`` left in it may name, through a link, any file.
        if path is None or not pattern.startswith("/") or _normal(path) != path:
            return False
        target = path
        if pattern.endswith("/"):
            root = _normal(pattern)
            return target.startswith(root.rstrip("/") + "/")
        return target == _normal(pattern)
    # Exactly the command when there is one (a summary may be shortened for display).
    return pattern == (command if command is not None else summary)


def shown_action_covered(action: ActionDetails, pattern: str) -> bool:
    """Does ``pattern`` (the one the person left in the dialog) cover the action shown?"""
    return covers(
        action.pattern_kind,
        pattern,
        summary=action.summary,
        command=action.command,
        path=action.path,
    )


@dataclass(frozen=True)
class ActionRule:
    agent: str
    tool: str
    kind: PatternKind
    pattern: str
    decision: Decision
    remember: Remember
    created: float
    expires: float | None = None

    def key(self) -> tuple[str, str, PatternKind, str]:
        return (self.agent, self.tool, self.kind, self.pattern)

    def describe(self) -> str:
        verdict = "allow" if self.decision is Decision.ALLOW else "deny"
        return f"{verdict} {self.agent} {self.tool} {self.kind.value} {self.pattern!r}"

    def to_json(self) -> dict[str, Any]:
        obj = asdict(self)
        obj.update(kind=self.kind.value, decision=self.decision.value, remember=self.remember.value)
        return obj

    @classmethod
    def from_json(cls, obj: Any) -> ActionRule:
        if not isinstance(obj, dict):
            raise ValueError(f"a rule must be an object, got {type(obj).__name__}")
        for name in ("agent", "tool", "pattern"):
            if not isinstance(obj.get(name), str):
                raise ValueError(f"rule field {name!r} must be a string")
        expires = obj.get("expires")
        if expires is not None and not isinstance(expires, int | float):
            raise ValueError("rule field 'expires' must be a number or null")
        return cls(
            agent=obj["agent"],
            tool=obj["tool"],
            kind=PatternKind(str(obj.get("kind"))),
            pattern=obj["pattern"],
            decision=Decision(str(obj.get("decision"))),
            remember=Remember(str(obj.get("remember"))),
            created=float(obj.get("created", 0)),
            expires=None if expires is None else float(expires),
        )


class ActionRuleStore:
    """Remembered action choices: a JSON file plus this broker's session rules.

    Thread-safe (one lock); the file is re-read when it changed on disk.
    """

    def __init__(
        self,
        path: Path,
        clock: Callable[[], float] = time.time,
        on_problem: Callable[[str], None] | None = None,
        lock_timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        self.path = Path(path)
        self.lock_timeout = lock_timeout
        self.problems: list[str] = []
        self._clock = clock
        self._on_problem = on_problem
        self._lock = threading.RLock()
        self._session: dict[tuple[str, str, PatternKind, str], ActionRule] = {}
        self._file: list[ActionRule] = []
        self._stamp: tuple[int, int, int] | None = None

    def _problem(self, text: str) -> None:
        self.problems.append(text)
        if self._on_problem is not None:
            self._on_problem(text)
        else:
            _log.warning("%s", text)

    def _reload(self) -> None:
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            self._file, self._stamp = [], None
            return
        except OSError as exc:
            self._problem(f"{self.path}: cannot read: {exc.strerror}")
            return
        stamp = (st.st_mtime_ns, st.st_size, st.st_ino)
        if stamp == self._stamp:
            return
        try:
            doc = json.loads(self.path.read_text(encoding="utf-8"))
            if not isinstance(doc, dict) or not isinstance(doc.get("rules"), list):
                raise ValueError("expected an object with a 'rules' array")
            rules = [ActionRule.from_json(item) for item in doc["rules"]]
        except (OSError, ValueError) as exc:
            try:
                aside = f"kept aside as {move_aside(self.path, self._clock())}"
            except OSError as move_error:
                aside = f"could not be moved aside: {move_error.strerror or move_error}"
            self._problem(f"{self.path}: {exc}; {aside}")
            self._file, self._stamp = [], None
            return
        self._file, self._stamp = rules, stamp

    def _locked(self) -> contextlib.AbstractContextManager[None]:
        """The cross-process lock beside the file, held across read, change and
        rename (the one :mod:`registry_core.file_lock` gives ``policies.yaml``);
        raises ``OSError`` or :class:`~registry_core.file_lock.LockTimeoutError`."""
        return exclusive(lock_path_for(self.path), self.lock_timeout)

    def _reload_locked(self) -> None:
        """Read the file afresh (under the lock: another process may have written it
        within our stamp's resolution)."""
        self._stamp = None
        self._reload()

    def _write(self) -> None:
        """Write the stored rules (under the lock); raises ``OSError``/``PolicyError``."""
        doc = {"version": FILE_VERSION, "rules": [rule.to_json() for rule in self._file]}
        text = json.dumps(doc, indent=2, ensure_ascii=False) + "\n"
        write_atomic(self.path, text)
        st = os.stat(self.path)
        self._stamp = (st.st_mtime_ns, st.st_size, st.st_ino)

    def _save(self) -> None:
        try:
            self._write()
        except (OSError, PolicyError) as exc:
            self._stamp = None  # what is in memory is not what the file holds
            self._problem(f"{self.path}: cannot write: {exc}")

    def rules(self) -> list[ActionRule]:
        """Every live rule (expired ones dropped), session rules first."""
        with self._lock:
            self._reload()
            now = self._clock()
            live = [*self._session.values(), *self._file]
            return [r for r in live if r.expires is None or r.expires > now]

    def lookup(
        self, agent: str, tool: str, *, summary: str, command: str | None, path: str | None
    ) -> ActionRule | None:
        """The rule deciding this action, a deny before any allow; ``None`` to ask."""
        found: ActionRule | None = None
        for rule in self.rules():
            if (rule.agent, rule.tool) != (agent, tool):
                continue
            if not covers(rule.kind, rule.pattern, summary=summary, command=command, path=path):
                continue
            if rule.decision is Decision.DENY:
                return rule
            found = found or rule
        return found

    def forget(
        self, agent: str | None = None, tool: str | None = None, pattern: str | None = None
    ) -> list[ActionRule]:
        """Drop the stored rules matching every given field; returns what was dropped."""

        def chosen(rule: ActionRule) -> bool:
            return all(
                want is None or have == want
                for want, have in ((agent, rule.agent), (tool, rule.tool), (pattern, rule.pattern))
            )

        with self._lock, self._locked():
            self._reload_locked()
            dropped = [r for r in self._file if chosen(r)]
            if dropped:
                self._file = [r for r in self._file if not chosen(r)]
                self._save()
            for key in [k for k, r in self._session.items() if chosen(r)]:
                dropped.append(self._session.pop(key))
        return dropped

    def revoke(self, rules: Iterable[ActionRule]) -> list[ActionRule]:
        """Drop exactly these rules (by agent, tool, pattern kind and pattern), stored or
        of this session; returns what was dropped (a rule already gone is skipped)."""
        keys = {rule.key() for rule in rules}
        with self._lock, self._locked():
            self._reload_locked()
            dropped = [r for r in self._file if r.key() in keys]
            if dropped:
                self._file = [r for r in self._file if r.key() not in keys]
                self._save()
            for key in keys & self._session.keys():
                dropped.append(self._session.pop(key))
        return dropped

    def remember(
        self, agent: str, tool: str, kind: PatternKind, pattern: str, remember: Remember
    ) -> ActionRule | None:
        """Store the person's choice (``once`` stores nothing).

        Never raises (the broker stores an answer on its way to the reply): a rule
        that cannot be written is reported and kept in memory."""
        if remember is Remember.ONCE:
            return None
        now = float(int(self._clock()))
        duration = DURATIONS.get(remember)
        decision = Decision.DENY if remember is Remember.DENY_ALWAYS else Decision.ALLOW
        rule = ActionRule(
            agent,
            tool,
            kind,
            pattern,
            decision,
            remember,
            now,
            None if duration is None else now + duration,
        )
        with self._lock:
            if remember is Remember.SESSION:
                self._session[rule.key()] = rule
                return rule
            self._session.pop(rule.key(), None)
            try:
                with self._locked():
                    self._reload_locked()
                    self._file = [r for r in self._file if r.key() != rule.key()]
                    self._file.append(rule)
                    self._write()
            except (OSError, OllieError) as exc:  # no lock, no directory, a full disk...
                self._file = [r for r in self._file if r.key() != rule.key()]
                self._stamp = None  # read the file again next time
                self._session[rule.key()] = rule
                self._problem(f"{self.path}: cannot write: {exc}; kept for this session only")
        return rule
