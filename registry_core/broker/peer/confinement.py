"""Is a broker peer inside a sandbox?  Read from ``/proc``, failing closed.

A peer counts as *sandboxed* when any of these holds:

* its user, mount or PID namespace differs from the broker's own (the
  namespace sandbox puts every tool in fresh ones);
* ``NoNewPrivs: 1`` in its ``/proc/<pid>/status`` (the Landlock sandbox sets
  ``no_new_privs``; sudo cannot gain root in such a process anyway);
* any of those facts cannot be read (the peer exited, hid its ``/proc``
  entries by being non-dumpable, or sits where we cannot see it).

A sandboxed requester is labelled so everywhere a person looks (dialog,
notification, terminal/kdialog/zenity, audit log) and never gets an
``askpass`` answer: only a dispatcher outside the sandbox runs ``sudo -A``.

Which sandbox a sandboxed peer is in (:func:`sandbox_id`) decides whose broker
budget it spends (``limits.py``, finding 8 of containment II).

Reading another process's ``/proc/<pid>/ns/*`` needs ptrace-read access: a
same-uid peer that made itself non-dumpable is unreadable and so counts as
sandboxed.  ``ollie-askpass`` therefore stays dumpable until the broker has
identified it (it pings first; see ``registry_core/cli/askpass.py``).
"""

from __future__ import annotations

import os
from pathlib import Path

SANDBOX_LABEL = "from inside the sandbox"
NAMESPACES = ("user", "mnt", "pid")


def read_proc_file(path: str) -> bytes:
    """Up to 64 KiB of a ``/proc`` file in one open and as few reads as it takes;
    raises OSError.  (No buffered file object: this runs for every connection.)"""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        chunks: list[bytes] = []
        size = 0
        while size < 65536:
            chunk = os.read(fd, 65536 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def no_new_privs(status: bytes) -> bool:
    """The ``NoNewPrivs`` flag in a ``/proc/<pid>/status`` text; raises ValueError/IndexError."""
    start = status.find(b"\nNoNewPrivs:")
    if start < 0:
        raise ValueError("no NoNewPrivs line")
    end = status.find(b"\n", start + 1)
    return status[start + 12 : end if end >= 0 else None].split()[0] != b"0"


def sandbox_reasons(
    pid: int,
    *,
    proc: Path | str = "/proc",
    own: str = "self",
    status: bytes | None = None,
) -> tuple[str, ...]:
    """Why peer ``pid`` counts as sandboxed (empty: it does not).

    ``own`` names the broker's own ``/proc`` entry (``self``); ``proc`` is the
    proc file system (both are parameters for the tests).  ``status`` is the
    peer's ``/proc/<pid>/status`` when the caller has just read it (one read
    serves this check and the parent pid); an empty one counts as unreadable.

    Four readlinks and at most one read per call, nothing cached: the broker's
    own namespaces are read afresh too, so a comparison never rests on an
    earlier answer."""
    reasons: list[str] = []
    base = os.fspath(proc)
    peer = f"{base}/{pid}"
    mine = f"{base}/{own}"
    for name in NAMESPACES:
        try:
            theirs = os.readlink(f"{peer}/ns/{name}")
        except OSError as exc:
            reasons.append(f"cannot read its {name} namespace ({exc.strerror or exc})")
            continue
        try:
            ours = os.readlink(f"{mine}/ns/{name}")
        except OSError as exc:
            reasons.append(f"cannot read the broker's own {name} namespace ({exc.strerror or exc})")
            continue
        if theirs != ours:
            reasons.append(f"it runs in another {name} namespace")
    try:
        if status is None:
            status = read_proc_file(f"{peer}/status")
        if no_new_privs(status):
            reasons.append("it runs with no_new_privs (NoNewPrivs: 1)")
    except (OSError, ValueError, IndexError) as exc:
        reasons.append(f"cannot read its NoNewPrivs flag ({exc})")
    return tuple(reasons)


def sandbox_id(
    pid: int, *, stat: bytes | None = None, proc: Path | str = "/proc", own: str = "self"
) -> str:
    """Which sandbox peer ``pid`` is in, as the broker's budget key (read at accept time).

    Its PID namespace when that is not the broker's own (the namespace sandbox gives
    every call a fresh one): ``"pid namespace pid:[4026532281]"``; otherwise its
    session (the dispatcher starts every call in a session of its own, and the
    Landlock sandbox keeps the broker's namespaces): ``"session 4242"``, from
    ``stat`` (the peer's ``/proc/<pid>/stat`` when the caller has just read it);
    ``"unidentified peers"`` when neither can be read.  A sandboxed process can
    make itself a new session (or namespace), so this key only shares the budget
    among sandboxes; the cap on all sandboxed peers of a uid is what holds."""
    base = os.fspath(proc)
    try:
        theirs = os.readlink(f"{base}/{pid}/ns/pid")
        if theirs != os.readlink(f"{base}/{own}/ns/pid"):
            return f"pid namespace {theirs}"
    except OSError:
        pass
    if stat is None:
        try:
            stat = read_proc_file(f"{base}/{pid}/stat")
        except OSError:
            stat = b""
    # "pid (comm) state ppid pgrp session ...": the command name may hold anything.
    fields = stat[stat.rfind(b")") + 2 :].split()
    if len(fields) > 3 and fields[3].isdigit():
        return f"session {int(fields[3])}"
    return "unidentified peers"
