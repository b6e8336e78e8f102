"""The README is a test: every shell block of its Usage section, in order, exactly as written.

A fresh non-root account (``useradd -m``, so its home holds Debian's
``/etc/skel/.profile``, which puts ``~/.local/bin`` on ``PATH`` for login
shells) plays the newcomer.  The Quick start's install step is the real one
``make run`` runs, ``scripts/install-user-commands``, pointed at the user's
runtime (``sudo_user.py``: a venv the user can execute; the Makefile's own
``.venv`` may live where the account cannot read).  Then each ``sh`` block of
``## Usage`` runs in a new login shell ("a new terminal") as that user, with
``set -e``, starting where the previous block left off, and its documented
outcome is checked.  A README block this test does not know fails the test:
keep README and test in step.

Needs root (to create the account): skipped locally otherwise, a failure
under CI=true.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import sudo_user
from sudo_user import SudoUser

pytestmark = pytest.mark.realstack

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
INSTALL = REPO / "scripts" / "install-user-commands"
BLOCK = re.compile(r"^```sh\n(.*?)^```$", re.MULTILINE | re.DOTALL)


def usage_blocks(text: str) -> list[str]:
    """The ``sh`` blocks between ``## Usage`` and the next ``## `` heading."""
    start = text.index("\n## Usage\n")
    end = text.find("\n## ", start + 1)
    return BLOCK.findall(text[start : end if end != -1 else len(text)])


@pytest.fixture(scope="module")
def newcomer() -> Iterator[SudoUser]:
    with sudo_user.throwaway() as user:
        yield user


class Terminal:
    """New login shells of the user, each starting in the directory the last one ended in."""

    def __init__(self, user: SudoUser) -> None:
        self.user = user
        self.cwd = user.home
        self.runtime = user.base / "walkthrough-run"  # scratch: where each shell ended
        self.runtime.mkdir(mode=0o700)
        os.chown(self.runtime, user.uid, user.gid)

    def env(self) -> dict[str, str]:
        return {
            "HOME": str(self.user.home),
            "USER": self.user.name,
            "LOGNAME": self.user.name,
            "SHELL": "/bin/bash",
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "LANG": "C.UTF-8",
            # No XDG_RUNTIME_DIR, as in a login without systemd-logind: the broker
            # socket goes to the private fallback under ~/.cache.  (A runtime
            # directory in /tmp would be writable through the profile's {TMPDIR},
            # and the dispatcher rightly refuses to run tools then.)
        }

    def run(self, script: str) -> subprocess.CompletedProcess[str]:
        where = self.runtime / "cwd"
        wrapped = f'set -e\n{script}\npwd > "{where}"\n'
        done = subprocess.run(
            ["bash", "-l", "-c", wrapped],
            user=self.user.uid,
            group=self.user.gid,
            extra_groups=self.user.groups,
            env=self.env(),
            cwd=self.cwd,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        if done.returncode == 0:
            self.cwd = Path(where.read_text().strip())
        return done


def check_tools_block(result: subprocess.CompletedProcess[str], user: SudoUser) -> None:
    out = result.stdout
    assert re.search(r"^hello\b", out, re.MULTILINE), out  # ollie-tools list
    assert "Say hello." in out  # ollie-tools show hello
    assert out.rstrip().endswith("Hello, Ann"), out  # ollie-tools call, sandboxed
    assert (user.home / ".config" / "ollie" / "tools" / "hello.meta").is_file()


def check_sandbox_block(result: subprocess.CompletedProcess[str], user: SudoUser) -> None:
    assert "rox" in result.stdout or "ro" in result.stdout, result.stdout


def check_policy_block(result: subprocess.CompletedProcess[str], user: SudoUser) -> None:
    lines = result.stdout.splitlines()
    assert lines[0] == "no remembered policies"
    assert any(line.startswith("remembered: allow hello") for line in lines), lines
    assert any(line.startswith("remembered: deny hello") for line in lines), lines
    assert "revoked 2 policies" in lines
    assert lines[-1] == "no audit records"


def check_ollie_core_block(result: subprocess.CompletedProcess[str], user: SudoUser) -> None:
    link = user.home / ".config" / "ollie" / "scripts" / "x" / "elevate"
    assert link.resolve() == (user.bin / "ollie-elevate").resolve()


# The documented outcome of each Usage block, in README order, keyed by its first command.
CHECKS: list[tuple[str, Callable[[subprocess.CompletedProcess[str], SudoUser], None]]] = [
    ("mkdir -p ~/.config/ollie/tools && cd ~/.config/ollie/tools", check_tools_block),
    ("ollie-tools sandbox show", check_sandbox_block),
    ("ollie-tools policy list", check_policy_block),
    ("mkdir -p ~/.config/ollie/scripts/x", check_ollie_core_block),
]


def test_the_usage_section_is_known_to_this_test() -> None:
    blocks = usage_blocks(README.read_text(encoding="utf-8"))
    assert [b.splitlines()[0].split("#")[0].strip() for b in blocks] == [c for c, _ in CHECKS]


def test_the_readme_usage_section_works_verbatim_for_a_newcomer(newcomer: SudoUser) -> None:
    terminal = Terminal(newcomer)
    before = terminal.run("command -v ollie-tools || echo not-found")
    assert before.stdout.strip() == "not-found"  # a newcomer has nothing on PATH yet
    # The Quick start: `make run` installs the commands (saying so once), then starts the tray.
    install = terminal.run(f"{INSTALL} {newcomer.bin}")
    assert install.returncode == 0, install.stderr
    assert "Installed the commands into" in install.stdout
    again = terminal.run(f"{INSTALL} {newcomer.bin}")
    assert (again.returncode, again.stdout) == (0, ""), again
    blocks = usage_blocks(README.read_text(encoding="utf-8"))
    assert len(blocks) == len(CHECKS)
    for block, (_, check) in zip(blocks, CHECKS, strict=True):
        result = terminal.run(block)
        assert result.returncode == 0, (
            f"{block}\n--- stdout\n{result.stdout}\n--- stderr\n{result.stderr}"
        )
        check(result, newcomer)
