"""Which environment and terminal a chosen front-end is built with, and the exact refusal."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_prompter_select import make_env, programs_in

from registry_core.broker.ask.choose import choose_prompter, fallback_chain, is_kde
from registry_core.broker.ask.kdialog import KDialogPrompter
from registry_core.broker.ask.terminal import DEFAULT_TTY, TerminalPrompter
from registry_core.broker.ask.zenity import ZenityPrompter


@pytest.fixture
def tty() -> Iterator[str]:
    master, slave = os.openpty()
    yield os.ttyname(slave)
    os.close(master)
    os.close(slave)


@pytest.mark.parametrize("name", ["kdialog", "zenity"])
def test_a_named_dialog_front_end_uses_the_given_environment(tmp_path: Path, name: str) -> None:
    find = programs_in(tmp_path)
    prompter = choose_prompter(name, make_env(tmp_path, name), find_program=find)
    assert prompter.available()  # the injected program, with the given DISPLAY
    headless = make_env(tmp_path, display=None)
    assert not choose_prompter(name, headless, find_program=find).available()


def test_the_terminal_front_end_uses_the_given_terminal(tmp_path: Path, tty: str) -> None:
    prompter = choose_prompter("terminal", make_env(tmp_path), tty_path=tty)
    assert isinstance(prompter, TerminalPrompter)
    assert prompter.tty_path == tty
    default = choose_prompter("terminal", make_env(tmp_path))
    assert isinstance(default, TerminalPrompter)
    assert default.tty_path == DEFAULT_TTY == "/dev/tty"


def test_without_an_environment_the_process_environment_is_used(
    tmp_path: Path, tty: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = make_env(tmp_path, "zenity", "kdialog", XDG_CURRENT_DESKTOP="KDE")
    for name in ("PATH", "DISPLAY", "XDG_CURRENT_DESKTOP"):
        monkeypatch.setenv(name, env[name])
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    find = programs_in(tmp_path)
    assert isinstance(choose_prompter("auto", tty_path=tty, find_program=find), KDialogPrompter)
    assert choose_prompter("zenity", find_program=find).available()
    chain = fallback_chain(tty_path=tty, find_program=find)
    assert [p.name for p in chain] == ["kdialog", "zenity", "terminal"]
    assert isinstance(
        choose_prompter("auto", {}, tty_path=tty, find_program=find), TerminalPrompter
    )
    assert [p.name for p in fallback_chain({}, tty_path=tty, find_program=find)] == ["terminal"]


def test_auto_without_dialogs_uses_the_given_terminal(tmp_path: Path, tty: str) -> None:
    find = programs_in(tmp_path)
    prompter = choose_prompter("auto", make_env(tmp_path), tty_path=tty, find_program=find)
    assert isinstance(prompter, TerminalPrompter)
    assert prompter.tty_path == tty


def test_auto_on_kde_without_kdialog_takes_zenity(tmp_path: Path, tty: str) -> None:
    env = make_env(tmp_path, "zenity", XDG_CURRENT_DESKTOP="KDE")
    find = programs_in(tmp_path)
    assert isinstance(choose_prompter("auto", env, tty_path=tty, find_program=find), ZenityPrompter)


def test_an_unknown_name_is_refused_word_for_word(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"^unknown front-end 'qt'") as raised:
        choose_prompter("qt", make_env(tmp_path))
    assert str(raised.value) == (
        "unknown front-end 'qt': choose one of auto, terminal, kdialog, zenity, none"
    )


def test_kde_is_found_among_spaced_entries() -> None:
    assert is_kde({"XDG_CURRENT_DESKTOP": "GNOME: KDE "})
    assert not is_kde({"XDG_CURRENT_DESKTOP": ""})
