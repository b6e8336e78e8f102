"""Choosing a headless front-end: by name, ``auto``, and the in-process fallback chain.

``choose_prompter`` serves ``ollie-broker --front-end NAME``; ``auto`` picks
kdialog on KDE, else zenity, else kdialog, else the terminal, else ``none``
(each only when :meth:`available`).  A name given explicitly is built even
when it cannot ask right now: the caller decides whether that is an error
(it can call ``available()``).

``fallback_chain`` is the spec's order (kdialog → zenity → terminal, available
ones only) for ``ollie-tools call`` when no broker is listening; an empty
chain means nobody can be asked, and the call is denied.

Building a prompter does no I/O beyond these availability checks.

kdialog and zenity are the trusted programs of the system directories
(:func:`registry_core.trusted.find_trusted`), never the first on ``PATH``: a
dialog planted there would answer "approve" for the person, or keep the
password typed into it.  ``find_program`` replaces that lookup (tests).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping

from registry_core.broker.ask.kdialog import KDialogPrompter
from registry_core.broker.ask.none import NonePrompter
from registry_core.broker.ask.terminal import DEFAULT_TTY, TerminalPrompter
from registry_core.broker.ask.zenity import ZenityPrompter
from registry_core.broker.question import Prompter
from registry_core.trusted import find_trusted

FindProgram = Callable[[str], str | None]
"""A dialog program's name -> the absolute path to run (``None``: not installed)."""

FRONT_ENDS = ("auto", "terminal", "kdialog", "zenity", "none")
"""Every name ``choose_prompter`` accepts (the ``--front-end`` choices)."""


def is_kde(env: Mapping[str, str]) -> bool:
    """Whether ``XDG_CURRENT_DESKTOP`` (a colon-separated list) names KDE."""
    desktops = env.get("XDG_CURRENT_DESKTOP", "")
    return any(part.strip().upper() == "KDE" for part in desktops.split(":"))


def _kdialog(env: Mapping[str, str], find_program: FindProgram) -> KDialogPrompter:
    return KDialogPrompter(env, binary=find_program(KDialogPrompter.program))


def _zenity(env: Mapping[str, str], find_program: FindProgram) -> ZenityPrompter:
    return ZenityPrompter(env, binary=find_program(ZenityPrompter.program))


def choose_prompter(
    name: str,
    env: Mapping[str, str] | None = None,
    *,
    tty_path: str = DEFAULT_TTY,
    find_program: FindProgram = find_trusted,
) -> Prompter:
    """The front-end called ``name`` (one of :data:`FRONT_ENDS`), for ``env``.

    Raises ``ValueError`` for an unknown name, listing the valid ones.
    """
    env = dict(os.environ if env is None else env)
    if name == "terminal":
        return TerminalPrompter(tty_path)
    if name == "kdialog":
        return _kdialog(env, find_program)
    if name == "zenity":
        return _zenity(env, find_program)
    if name == "none":
        return NonePrompter()
    if name != "auto":
        raise ValueError(f"unknown front-end {name!r}: choose one of {', '.join(FRONT_ENDS)}")
    kdialog, zenity = _kdialog(env, find_program), _zenity(env, find_program)
    if is_kde(env) and kdialog.available():
        return kdialog
    for candidate in (zenity, kdialog, TerminalPrompter(tty_path)):
        if candidate.available():
            return candidate
    return NonePrompter()


def fallback_chain(
    env: Mapping[str, str] | None = None,
    *,
    tty_path: str = DEFAULT_TTY,
    find_program: FindProgram = find_trusted,
) -> list[Prompter]:
    """The available front-ends in the spec's fallback order: kdialog, zenity, terminal."""
    env = dict(os.environ if env is None else env)
    chain: list[Prompter] = [
        _kdialog(env, find_program),
        _zenity(env, find_program),
        TerminalPrompter(tty_path),
    ]
    return [prompter for prompter in chain if prompter.available()]
