"""Manual pages and completions rendered from the programs' own parsers (ollie_tray.manuals)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from ollie_tray import manuals
from registry_core import paths


@pytest.mark.parametrize("program", sorted(manuals.PROGRAMS))
def test_each_page_documents_its_programs_options(program: str) -> None:
    page = manuals.man_page(program, release="9.8.7")
    assert page.startswith(".TH ")
    assert "9.8.7" in page.splitlines()[0]
    assert page.splitlines()[2].startswith(program.replace("-", "\\-") + " \\- ")
    for action in manuals.parser_for(program)._actions:
        if action.dest == "help":
            continue  # every program has it; man pages leave it out
        for option in action.option_strings:
            if option.startswith("--"):
                assert option.replace("-", "\\-") in page, option


def test_bash_completion_offers_the_subcommands() -> None:
    script = manuals.completion("ollie-tools", "bash")
    for command in ("list", "call", "sandbox", "mcp"):
        assert command in script


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash")
def test_the_bash_completion_loads_and_registers_itself(tmp_path: Path) -> None:
    script = tmp_path / "ollie-tools"
    script.write_text(manuals.completion("ollie-tools", "bash"))
    done = subprocess.run(
        ["bash", "-c", f"source {script} && complete -p ollie-tools"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "ollie-tools" in done.stdout


def test_fish_completion_scopes_options_to_their_subcommand() -> None:
    lines = manuals.completion("ollie-tools", "fish").splitlines()
    call_timeout = [line for line in lines if "-l timeout" in line and "from call" in line]
    assert call_timeout and all(" -r" in line for line in call_timeout)
    top = [line for line in lines if "-a call" in line]
    assert top and "not __fish_seen_subcommand_from" in top[0]


def test_fish_quoting_keeps_quotes_inside_descriptions() -> None:
    assert manuals._fish_quote("it's") == "'it\\'s'"


def test_install_puts_every_page_and_completion_where_man_and_shells_look(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shipped = tmp_path / "shipped"
    manuals.render_all(shipped, release="1.2.3")
    monkeypatch.setattr(manuals, "shipped_dir", lambda: shipped)
    env = {"HOME": str(tmp_path / "home")}
    written = manuals.install_manuals(env)
    assert len(written) == 4 * len(manuals.PROGRAMS)
    page = tmp_path / "home/.local/share/man/man1/ollie-tools.1"
    assert "1.2.3" in page.read_text()  # the shipped page, not one rendered again
    assert (tmp_path / "home/.config/fish/completions/ollie-tray.fish").is_file()
    assert (tmp_path / "home/.local/share/bash-completion/completions/ollie-approve").is_file()
    assert (tmp_path / "home/.local/share/zsh/site-functions/_ollie-broker").is_file()


def test_a_checkout_without_shipped_files_renders_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(manuals, "shipped_dir", lambda: tmp_path / "nothing")
    env = {"HOME": str(tmp_path), "XDG_DATA_HOME": str(tmp_path / "data")}
    manuals.install_manuals(env)
    assert (tmp_path / "data/man/man1/ollie-elevate.1").read_text().startswith(".TH")
    assert paths.config_home(env) == tmp_path / ".config"
