"""Remembered-policy decisions repeated without being made again (issue 19).

An agent asks for the same escape over and over: the same tool, argv,
working directory and arguments, decided each time by the same remembered
policy.  Making that decision (the registry's facts, the policy lookup, the
audit line's text) costs several times what the socket costs, so the broker
keeps, per request content, what the last decision was and the conditions
under which making it again must give the same answer:

* the same registry snapshot (``LiveRegistry`` hands out a new object on any
  change of a tools directory): the tool, its variant, its executable and
  every mismatch between the request and what the registry would run;
* the same sha256 of that executable, asked of the broker's hash cache
  (a ``stat`` while the file is provably unchanged, else a fresh hash);
* the policy store's :class:`~registry_core.elevation.policies.LookupStamp`:
  no policy added, changed or revoked (in memory or in ``policies.yaml``, read
  afresh as every lookup does), and none of the key's policies expired on the
  wall or the monotonic clock.

Only requests whose decision depends on nothing else are kept: ``sandbox``
escapes (a ``sudo`` allow issues a fresh grant each time) without free-form
``code``, from a local requester (a forwarded one's facts depend on its host),
decided ``by: policy``.  Pausing and shutting down are checked before the
memo, every time.  A repeat still does everything a person or an auditor
sees: a fresh broker request id, its own audit line (with this
connection's requester), its denial in the desktop's list, its own reply.

A broker decides the requests read in one event loop step together, after
every read that delivered them (``server.py``).  Within such a batch the
checks are made once (:class:`BatchChecks`): the registry snapshot is taken
once, each executable's sha256 asked for once, ``policies.yaml`` looked at
once; a policy changed in memory during the batch still counts at once
(the store's change count is compared on every repeat).

The key is the request's content in exact JSON text (the id aside: the bytes
of its frame after the id when the frame memo read it, ``frame_memo.py``),
plus whether the requester is sandboxed; entries live only for the registry
snapshot they were made with, and at most :data:`MAX_ENTRIES` are kept.
"""

from __future__ import annotations

import json
from collections.abc import Hashable
from dataclasses import dataclass

from registry_core.elevation import messages as m
from registry_core.elevation.audit import AuditRequester
from registry_core.elevation.audit_quick import LineParts, assemble
from registry_core.elevation.facts import SHA256
from registry_core.elevation.frame_memo import FRAME_REST
from registry_core.elevation.identity import Requester
from registry_core.elevation.policies import LookupStamp, PolicyStore
from registry_core.elevation.prompter import ApprovalRequest, Remember
from registry_core.elevation.protocol import frame_rest, with_id
from registry_core.elevation.recording import line_parts
from registry_core.registry import Registry

MAX_ENTRIES = 512
# The most a frame's head can take for a valid id: its version and id keys and the
# id as JSON text (each character of a string id escaped as \uXXXX at worst).
MAX_ID_FRAME = 64 + 12 * m.MAX_ID_LENGTH

# The key's text of ``args``: exact (no float or key-order folding: two texts that
# differ are two entries, never one entry for two contents).
_KEY_ENCODER = json.JSONEncoder(separators=(",", ":"), allow_nan=False)

MemoKey = tuple[Hashable, ...]


@dataclass(frozen=True, slots=True)
class Repeatable:
    """One remembered-policy decision and what it rested on."""

    snapshot: object
    """The registry snapshot the facts came from (compared by identity)."""
    executable: str
    sha256: str
    stamp: LookupStamp
    tool: str
    host: str
    decision: m.Decision
    reason: str
    remember: str | None
    audit: LineParts
    """The audit line around its time, request id and requester (``audit_quick``)."""
    reply_rest: bytes | None = None
    """The reply's frame after its id (``protocol.frame_rest``; ``None``: encode it)."""

    def audit_line(self, time: float, request_id: str, requester: Requester) -> bytes | None:
        """This repeat's audit line (``None``: the general path must write it)."""
        requester_json = AuditRequester.from_requester(requester).json_text
        return assemble(time, request_id, self.audit, requester_json)

    def reply_frame(self, request_id: m.RequestId) -> bytes | None:
        """The frame of :meth:`reply` for ``request_id`` (a decoded request's id), or
        ``None`` when it must be encoded."""
        if self.reply_rest is None or len(self.reply_rest) + MAX_ID_FRAME > m.MAX_FRAME:
            return None
        return with_id(request_id, self.reply_rest)

    def reply(self, request_id: m.RequestId) -> m.DecisionReply:
        return m.DecisionReply(
            id=request_id,
            decision=self.decision,
            reason=self.reason,
            by=m.DecidedBy.POLICY,
            remember=self.remember,
        )


def memo_key(req: m.ElevateRequest, requester: Requester) -> MemoKey | None:
    """The key of ``req``'s decision, or ``None`` when it is never repeated from memory."""
    if req.kind is not m.Kind.SANDBOX or req.code is not None or requester.remote:
        return None
    rest = req.__dict__.get(FRAME_REST)
    if type(rest) is bytes:  # the frame's own bytes after the id: its exact content
        return (rest, requester.sandboxed)
    try:
        args = _KEY_ENCODER.encode(req.args)
    except (TypeError, ValueError, RecursionError):
        return None
    return (
        req.tool,
        req.argv,
        req.cwd,
        req.host,
        req.client,
        req.timeout,
        args,
        requester.sandboxed,
    )


def _reply_rest(reply: m.DecisionReply) -> bytes | None:
    try:
        return frame_rest(reply)
    except m.MessageError:
        return None  # encoded (and its error reported) on every repeat instead


class BatchChecks:
    """The checks made once for a batch of requests all read before it began."""

    def __init__(self) -> None:
        self.registry: Registry | None = None
        """The registry snapshot of this batch (``Broker`` takes it at first use)."""
        self._hashes: dict[str, str | None] = {}
        self._policies_read: set[int] = set()

    def sha256(self, path: str) -> str | None:
        """The sha256 of ``path``, asked of the broker's hash cache once per batch."""
        try:
            return self._hashes[path]
        except KeyError:
            digest = self._hashes[path] = SHA256.sha256(path)
            return digest

    def holds(self, policies: PolicyStore, stamp: LookupStamp) -> bool:
        """``policies.holds(stamp)``, the file looked at once per batch."""
        first = id(policies) not in self._policies_read
        self._policies_read.add(id(policies))
        return policies.holds(stamp, refresh=first)


class DecisionMemo:
    """The repeatable decisions of one broker, for one registry snapshot at a time."""

    def __init__(self, max_entries: int = MAX_ENTRIES) -> None:
        self.max_entries = max_entries
        self._snapshot: object | None = None  # pragma: no mutate (any non-snapshot sentinel)
        self._entries: dict[MemoKey, Repeatable] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: MemoKey, snapshot: object) -> Repeatable | None:
        """The entry for ``key`` made with ``snapshot``; a newer snapshot empties the memo
        (no old snapshot is kept alive for it)."""
        if snapshot is not self._snapshot:
            self.clear()
            return None
        return self._entries.get(key)

    def holding(
        self,
        key: MemoKey,
        snapshot: object,
        policies: PolicyStore,
        batch: BatchChecks | None = None,
    ) -> Repeatable | None:
        """The entry for ``key`` if what it rested on still holds: the registry
        ``snapshot``, the executable's sha256 and the policies' stamp (a stale entry
        is dropped); ``batch``: checked as part of that batch."""
        entry = self.get(key, snapshot)
        if entry is None:
            return None
        if batch is None:
            same = SHA256.sha256(entry.executable) == entry.sha256
            same = same and policies.holds(entry.stamp)
        else:
            same = batch.sha256(entry.executable) == entry.sha256
            same = same and batch.holds(policies, entry.stamp)
        if not same:
            self.drop(key)
            return None
        return entry

    def learn(
        self,
        key: MemoKey,
        snapshot: object,
        stamp: LookupStamp,
        ar: ApprovalRequest,
        reply: m.DecisionReply,
    ) -> None:
        """Keep ``reply``, a remembered policy's decision on ``ar`` made with
        ``snapshot`` after ``stamp`` was taken, when it can be repeated."""
        if ar.executable is None or ar.sha256 is None or reply.grant is not None:
            return
        remember = None if reply.remember is None else Remember(reply.remember)
        parts = line_parts(ar, reply.decision, reply.by, remember, reply.reason)
        if parts is None:
            return
        entry = Repeatable(
            snapshot=snapshot,
            executable=ar.executable,
            sha256=ar.sha256,
            stamp=stamp,
            tool=ar.tool,
            host=ar.host,
            decision=reply.decision,
            reason=reply.reason,
            remember=reply.remember,
            audit=parts,
            reply_rest=_reply_rest(reply),
        )
        self.put(key, entry)

    def put(self, key: MemoKey, entry: Repeatable) -> None:
        if entry.snapshot is not self._snapshot:
            self.clear()
            self._snapshot = entry.snapshot
        elif len(self._entries) >= self.max_entries and key not in self._entries:
            self._entries.clear()
        self._entries[key] = entry

    def drop(self, key: MemoKey) -> None:
        self._entries.pop(key, None)

    def clear(self) -> None:
        self._entries.clear()
        self._snapshot = None  # pragma: no mutate (any non-snapshot sentinel)
