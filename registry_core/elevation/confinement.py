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


def _namespace(proc: Path, pid: str, name: str) -> str:
    return os.readlink(proc / pid / "ns" / name)


def _no_new_privs(proc: Path, pid: str) -> bool:
    """The ``NoNewPrivs`` flag of ``pid``; raises OSError/ValueError when unreadable."""
    with open(proc / pid / "status", "rb") as fh:
        status = fh.read(65536)
    for line in status.splitlines():
        if line.startswith(b"NoNewPrivs:"):
            return line.split()[1] != b"0"
    raise ValueError("no NoNewPrivs line")


def sandbox_reasons(pid: int, *, proc: Path = Path("/proc"), own: str = "self") -> tuple[str, ...]:
    """Why peer ``pid`` counts as sandboxed (empty: it does not).

    ``own`` names the broker's own ``/proc`` entry (``self``); ``proc`` is the
    proc file system (both are parameters for the tests)."""
    reasons: list[str] = []
    peer = str(pid)
    for name in NAMESPACES:
        try:
            theirs = _namespace(proc, peer, name)
        except OSError as exc:
            reasons.append(f"cannot read its {name} namespace ({exc.strerror or exc})")
            continue
        try:
            ours = _namespace(proc, own, name)
        except OSError as exc:
            reasons.append(f"cannot read the broker's own {name} namespace ({exc.strerror or exc})")
            continue
        if theirs != ours:
            reasons.append(f"it runs in another {name} namespace")
    try:
        if _no_new_privs(proc, peer):
            reasons.append("it runs with no_new_privs (NoNewPrivs: 1)")
    except (OSError, ValueError, IndexError) as exc:
        reasons.append(f"cannot read its NoNewPrivs flag ({exc})")
    return tuple(reasons)
