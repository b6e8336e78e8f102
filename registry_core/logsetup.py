"""One logging setup for every program: stderr, with syslog priorities for the journal.

Under systemd (a user unit, or an XDG autostart entry that the session starts
through systemd's generator) stderr is a stream to journald, and systemd says
so in ``JOURNAL_STREAM`` (``<device>:<inode>`` of that stream).  Only when
stderr is that very stream does each line start with ``<N>``, the syslog
priority of its record (journald reads it: ``SyslogLevelPrefix=`` is on by
default), so ``journalctl -p warning`` shows the warnings and errors and
nothing else.  Every line of a record carries the prefix (a traceback's
lines too: journald takes each line as its own entry).  Anywhere else —
a terminal, a file, a pipe, a ``JOURNAL_STREAM`` inherited from a parent
whose stderr was not ours — stderr stays as it was, no prefixes.

The handler writes to whatever ``sys.stderr`` is at the time of the record,
and calling :func:`setup_logging` again replaces the handler it installed
before, so tests and re-entrant ``main()`` calls never stack handlers.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Mapping
from typing import TextIO

PLAIN_FORMAT = "%(levelname)s:%(name)s:%(message)s"
"""The format of ``logging.basicConfig``: what ``ollie-tray -v`` printed before."""

MESSAGE_ONLY = "%(message)s"
"""What the command-line programs printed before (Python's last-resort handler)."""

# syslog(3) priorities.
PRIORITIES = {
    logging.CRITICAL: 2,
    logging.ERROR: 3,
    logging.WARNING: 4,
    logging.INFO: 6,
    logging.DEBUG: 7,
}


def priority(levelno: int) -> int:
    """The syslog priority of a logging level (levels between take the next lower one's)."""
    for level in sorted(PRIORITIES, reverse=True):
        if levelno >= level:
            return PRIORITIES[level]
    return PRIORITIES[logging.DEBUG]


def is_journal_stream(stream: TextIO, env: Mapping[str, str]) -> bool:
    """Is ``stream`` the journald stream ``JOURNAL_STREAM`` names (same device and inode)?"""
    value = env.get("JOURNAL_STREAM", "")
    device, sep, inode = value.partition(":")
    if not sep or not device.isdigit() or not inode.isdigit():
        return False
    try:
        st = os.fstat(stream.fileno())
    except (OSError, ValueError, AttributeError):
        return False
    return (st.st_dev, st.st_ino) == (int(device), int(inode))


class JournalFormatter(logging.Formatter):
    """Each line of a record prefixed with ``<N>``, its syslog priority."""

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        prefix = f"<{priority(record.levelno)}>"
        return "\n".join(prefix + line for line in text.split("\n"))


class _StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """A stream handler that writes to the ``sys.stderr`` of the moment."""

    def emit(self, record: logging.LogRecord) -> None:
        self.setStream(sys.stderr)
        super().emit(record)


_INSTALLED = "_ollie_logsetup"


def setup_logging(
    *,
    verbose: bool = False,
    fmt: str = MESSAGE_ONLY,
    env: Mapping[str, str] | None = None,
) -> logging.Handler:
    """Configure the root logger for a program: INFO with ``verbose``, else WARNING."""
    env = os.environ if env is None else env
    root = logging.getLogger()
    for handler in list(root.handlers):
        if getattr(handler, _INSTALLED, False):
            root.removeHandler(handler)
    handler = _StderrHandler(sys.stderr)
    setattr(handler, _INSTALLED, True)
    journal = is_journal_stream(sys.stderr, env)
    handler.setFormatter(JournalFormatter(fmt) if journal else logging.Formatter(fmt))
    root.addHandler(handler)
    root.setLevel(logging.INFO if verbose else logging.WARNING)
    return handler
