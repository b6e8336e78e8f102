"""Choosing a front-end by name, ``auto``, and the in-process fallback chain."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from registry_core.broker.ask.choose import (
    FRONT_ENDS,
    choose_prompter,
    fallback_chain,
    is_kde,
)
from registry_core.broker.ask.kdialog import KDialogPrompter
from registry_core.broker.ask.none import NonePrompter
from registry_core.broker.ask.terminal import TerminalPrompter
from registry_core.broker.ask.zenity import ZenityPrompter
from registry_core.trusted import find_trusted


@pytest.fixture
def tty() -> Iterator[str]:
    master, slave = os.openpty()
    yield os.ttyname(slave)
    os.close(master)
    os.close(slave)


@pytest.fixture
def no_tty(tmp_path: Path) -> str:
    return str(tmp_path / "no-tty")


def make_env(
    tmp_path: Path, *programs: str, display: str | None = ":5", **extra: str
) -> dict[str, str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for program in programs:
        path = bin_dir / program
        path.write_text("#!/bin/sh\nexit 0\n")
        path.chmod(0o755)
    env = {"PATH": str(bin_dir), **extra}
    if display is not None:
        env["DISPLAY"] = display
    return env


def programs_in(tmp_path: Path) -> Callable[[str], str]:
    """The dialog programs ``make_env`` wrote, injected by their absolute paths (a
    missing one is a path that does not exist); their directory on PATH is unused."""
    return lambda name: str(tmp_path / "bin" / name)


@pytest.mark.parametrize(
    ("programs", "desktop", "expected"),
    [
        (("kdialog", "zenity"), "KDE", KDialogPrompter),
        (("kdialog", "zenity"), "GNOME", ZenityPrompter),
        (("kdialog", "zenity"), "", ZenityPrompter),
        (("kdialog",), "GNOME", KDialogPrompter),
        (("zenity",), "KDE", ZenityPrompter),
        (("kdialog", "zenity"), "ubuntu:KDE", KDialogPrompter),
    ],
)
def test_auto_with_a_display(
    tmp_path: Path,
    no_tty: str,
    programs: tuple[str, ...],
    desktop: str,
    expected: type,
) -> None:
    env = make_env(tmp_path, *programs, XDG_CURRENT_DESKTOP=desktop)
    assert isinstance(
        choose_prompter("auto", env, tty_path=no_tty, find_program=programs_in(tmp_path)), expected
    )


def test_auto_without_display_uses_the_terminal(tmp_path: Path, tty: str) -> None:
    env = make_env(tmp_path, "kdialog", "zenity", display=None, XDG_CURRENT_DESKTOP="KDE")
    prompter = choose_prompter("auto", env, tty_path=tty, find_program=programs_in(tmp_path))
    assert isinstance(prompter, TerminalPrompter)
    assert prompter.tty_path == tty


def test_auto_with_nothing_is_none(tmp_path: Path, no_tty: str) -> None:
    env = make_env(tmp_path, display=None)
    assert isinstance(
        choose_prompter("auto", env, tty_path=no_tty, find_program=programs_in(tmp_path)),
        NonePrompter,
    )


def test_wayland_counts_as_a_display(tmp_path: Path, no_tty: str) -> None:
    env = make_env(tmp_path, "zenity", display=None, WAYLAND_DISPLAY="wayland-0")
    assert isinstance(
        choose_prompter("auto", env, tty_path=no_tty, find_program=programs_in(tmp_path)),
        ZenityPrompter,
    )


def test_programs_not_on_path_do_not_count(tmp_path: Path, no_tty: str) -> None:
    env = make_env(tmp_path)
    (tmp_path / "bin" / "zenity").write_text("not executable")
    assert isinstance(
        choose_prompter("auto", env, tty_path=no_tty, find_program=programs_in(tmp_path)),
        NonePrompter,
    )


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("terminal", TerminalPrompter),
        ("kdialog", KDialogPrompter),
        ("zenity", ZenityPrompter),
        ("none", NonePrompter),
    ],
)
def test_explicit_names(tmp_path: Path, no_tty: str, name: str, expected: type) -> None:
    # Built even when it cannot ask right now: the caller checks available().
    prompter = choose_prompter(
        name, make_env(tmp_path, display=None), tty_path=no_tty, find_program=programs_in(tmp_path)
    )
    assert isinstance(prompter, expected)
    assert prompter.name == name


def test_unknown_name_lists_the_valid_ones(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="auto, terminal, kdialog, zenity, none") as info:
        choose_prompter("qt", make_env(tmp_path))
    assert "'qt'" in str(info.value)
    assert FRONT_ENDS == ("auto", "terminal", "kdialog", "zenity", "none")


def test_fallback_chain_order(tmp_path: Path, tty: str, no_tty: str) -> None:
    env = make_env(tmp_path, "zenity", "kdialog")
    find = programs_in(tmp_path)
    chain = fallback_chain(env, tty_path=tty, find_program=find)
    assert [p.name for p in chain] == ["kdialog", "zenity", "terminal"]
    names = [p.name for p in fallback_chain(env, tty_path=no_tty, find_program=find)]
    assert names == ["kdialog", "zenity"]
    (tmp_path / "z").mkdir()
    only_zenity = make_env(tmp_path / "z", "zenity")
    chain = fallback_chain(only_zenity, tty_path=tty, find_program=programs_in(tmp_path / "z"))
    assert [p.name for p in chain] == ["zenity", "terminal"]
    headless = make_env(tmp_path, "zenity", "kdialog", display=None)
    assert fallback_chain(headless, tty_path=no_tty, find_program=find) == []


def test_without_an_injected_lookup_the_trusted_programs_count_not_path(
    tmp_path: Path, no_tty: str
) -> None:
    # Stand-ins first on PATH change nothing: what counts is what the system holds.
    env = make_env(tmp_path, "kdialog", "zenity")
    trusted = [name for name in ("kdialog", "zenity") if find_trusted(name)]
    assert [p.name for p in fallback_chain(env, tty_path=no_tty)] == trusted
    without = make_env(tmp_path)
    found = [p.name for p in fallback_chain(without, tty_path=no_tty)]
    assert found == trusted


def test_is_kde() -> None:
    assert is_kde({"XDG_CURRENT_DESKTOP": "KDE"})
    assert is_kde({"XDG_CURRENT_DESKTOP": "X-Generic:kde"})
    assert not is_kde({"XDG_CURRENT_DESKTOP": "GNOME"})
    assert not is_kde({"XDG_CURRENT_DESKTOP": "KDEish"})
    assert not is_kde({})
