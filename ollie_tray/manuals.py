"""Manual pages and shell completions of every Ollie command, made from its own parser.

One ``argparse`` parser per console script is the single description of its
options: the manual pages are rendered from it with argparse-manpage and the
bash and zsh completions with shtab (both maintained generators).  shtab has
no fish backend, so the fish completion is rendered here from the same
parser (docs/decisions.md, "Manual pages and completions").

The wheel ships the rendered files (``setup.py`` renders them into
``registry_core/_data/man`` and ``.../completions`` at build time); a checkout
renders them when they are installed.  :func:`install_manuals` puts them where
``man`` and the shells look for a user's own: ``$XDG_DATA_HOME/man/man1``,
``$XDG_DATA_HOME/bash-completion/completions``, ``$XDG_DATA_HOME/zsh/site-functions``
and ``$XDG_CONFIG_HOME/fish/completions`` (fish also reads
``$XDG_DATA_HOME/fish/vendor_completions.d``; the config one is the user's).
"""

from __future__ import annotations

import argparse
import importlib
import os
from collections.abc import Callable, Iterator, Mapping
from functools import partial
from pathlib import Path

from registry_core import paths
from registry_core.version import version

PROGRAMS: dict[str, str] = {
    "ollie-tools": "registry_core.cli.tools:build_parser",
    "ollie-tray": "ollie_tray.main:build_parser",
    "ollie-broker": "registry_core.cli.broker:build_parser",
    "ollie-askpass": "registry_core.cli.askpass:build_parser",
    "ollie-elevate": "registry_core.cli.elevate:build_parser",
    "ollie-remote": "registry_core.cli.remote:build_parser",
    "ollie-approve": "registry_core.cli.approve:build_parser",
}
"""Every console script and the function that builds its complete parser."""

SHELLS = ("bash", "zsh", "fish")


def parser_for(program: str) -> argparse.ArgumentParser:
    module, _, function = PROGRAMS[program].partition(":")
    build: Callable[[], argparse.ArgumentParser] = getattr(
        importlib.import_module(module), function
    )
    return build()


def man_page(program: str, release: str | None = None) -> str:
    """The roff manual page (section 1) of ``program``; ``release``: the version it
    documents (default: the installed one; the build passes the one it builds)."""
    from argparse_manpage.manpage import Manpage

    parser = parser_for(program)
    summary = (parser.description or program).split(": ")[0].split(". ")[0].rstrip(".")
    data = {
        "description": summary,
        "project_name": "Ollie Tray",
        "version": release or version(),
        "manual_title": "Ollie Tray Manual",
        "manual_section": 1,
        "url": "",
    }
    return str(Manpage(parser, _data=data))


def completion(program: str, shell: str) -> str:
    """The ``shell`` completion script of ``program``."""
    parser = parser_for(program)
    if shell == "fish":
        return fish_completion(parser)
    import shtab

    return str(shtab.complete(parser, shell=shell))


def _fish_quote(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _subparsers(
    parser: argparse.ArgumentParser,
) -> argparse._SubParsersAction[argparse.ArgumentParser] | None:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return action
    return None


def _fish_options(prog: str, parser: argparse.ArgumentParser, condition: str) -> Iterator[str]:
    for action in parser._actions:
        if not action.option_strings or action.help == argparse.SUPPRESS:
            continue
        words = [f"complete -c {prog}"]
        if condition:
            words.append(f"-n {_fish_quote(condition)}")
        for option in action.option_strings:
            if option.startswith("--"):
                words.append(f"-l {option[2:]}")
            elif len(option) == 2:
                words.append(f"-s {option[1]}")
        if action.nargs != 0:
            words.append("-r")
            if action.choices:
                words.append("-f -a " + _fish_quote(" ".join(str(c) for c in action.choices)))
        if action.help:
            words.append(f"-d {_fish_quote(str(action.help) % {'default': action.default})}")
        yield " ".join(words)


def fish_completion(parser: argparse.ArgumentParser) -> str:
    """fish ``complete`` lines for ``parser``'s options and subcommands (one level deep)."""
    prog = parser.prog
    lines = [f"# fish completion for {prog}, made from its argument parser"]
    sub = _subparsers(parser)
    lines += _fish_options(prog, parser, "")
    if sub is not None:
        names = " ".join(sub.choices)
        helps = {a.dest: a.help for a in sub._choices_actions}
        for name, child in sub.choices.items():
            description = f" -d {_fish_quote(str(helps[name]))}" if helps.get(name) else ""
            lines.append(
                f"complete -c {prog} -n {_fish_quote('not __fish_seen_subcommand_from ' + names)}"
                f" -a {name}{description}"
            )
            lines += _fish_options(prog, child, f"__fish_seen_subcommand_from {name}")
    return "\n".join(lines) + "\n"


def shipped_dir() -> Path:
    return paths.resources_dir()


def _shipped_or_rendered(relative: str, render: Callable[[], str]) -> str:
    shipped = shipped_dir() / relative
    try:
        return shipped.read_text(encoding="utf-8")
    except OSError:
        return render()


def completion_path(program: str, shell: str) -> str:
    """Where a shell's completion of ``program`` lives, relative to a completions tree."""
    if shell == "zsh":
        return f"zsh/_{program}"
    if shell == "fish":
        return f"fish/{program}.fish"
    return f"bash/{program}"


def render_all(root: Path, release: str | None = None) -> list[Path]:
    """Render every manual page to ``root/man/`` and completion to ``root/completions/``."""
    written = []
    for program in PROGRAMS:
        page = root / "man" / f"{program}.1"
        page.parent.mkdir(parents=True, exist_ok=True)
        page.write_text(man_page(program, release), encoding="utf-8")
        written.append(page)
        for shell in SHELLS:
            target = root / "completions" / completion_path(program, shell)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(completion(program, shell), encoding="utf-8")
            written.append(target)
    return written


def _data_home(env: Mapping[str, str]) -> Path:
    value = env.get("XDG_DATA_HOME")
    return Path(value) if value else Path(env.get("HOME") or Path.home()) / ".local" / "share"


def install_targets(env: Mapping[str, str], program: str) -> dict[str, Path]:
    """Where :func:`install_manuals` puts ``program``'s page and completions."""
    data = _data_home(env)
    return {
        "man": data / "man" / "man1" / f"{program}.1",
        "bash": data / "bash-completion" / "completions" / program,
        "zsh": data / "zsh" / "site-functions" / f"_{program}",
        "fish": paths.config_home(env) / "fish" / "completions" / f"{program}.fish",
    }


def install_manuals(env: Mapping[str, str]) -> list[Path]:
    """Install every manual page and completion for this user; return what was written."""
    written = []
    for program in PROGRAMS:
        targets = install_targets(env, program)
        texts = {"man": _shipped_or_rendered(f"man/{program}.1", partial(man_page, program))}
        for shell in SHELLS:
            texts[shell] = _shipped_or_rendered(
                f"completions/{completion_path(program, shell)}",
                partial(completion, program, shell),
            )
        for kind, text in texts.items():
            target = targets[kind]
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp = target.with_name(target.name + ".tmp")
            tmp.write_text(text, encoding="utf-8")
            os.replace(tmp, target)
            written.append(target)
    return written
