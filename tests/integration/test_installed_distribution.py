"""The newcomer's path from a built distribution, not from the checkout.

The wheel and the sdist are built from this checkout (``python -m build``),
then installed non-editable, as a throw-away user with an empty ``HOME``:
into a plain venv (the wheel) and with pipx (the sdist, built again on the
user's side).  Everything the user runs comes from that installation, so a
resource the distribution forgot (the default profile, the demo tools, the
icons, the desktop entries, the manual pages) fails here.  Dependencies come
from a wheelhouse made beforehand (``pip wheel``), so the user's installs
need no index.

Needs root (to create the user), Python's venv for an interpreter the user
can run, bubblewrap, Xvfb, dbus-run-session, man-db and desktop-file-utils;
a real-stack test (a failure instead of a skip under ``CI=true``).
"""

from __future__ import annotations

import os
import secrets
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from desktop_session import require
from local_users import Account, add_account, python_for, remove_account, shared_dir

pytestmark = [pytest.mark.realstack, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
BUILD_DEPENDENCIES = ("setuptools>=77", "wheel", "shtab>=1.7", "argparse-manpage>=4.5", "pyyaml")
PROGRAMS = (
    "ollie-tools",
    "ollie-tray",
    "ollie-broker",
    "ollie-askpass",
    "ollie-elevate",
    "ollie-remote",
    "ollie-approve",
)


@dataclass
class Newcomer:
    account: Account
    base: Path  # root-owned 0755: the distributions and the wheelhouse
    python: str

    @property
    def home(self) -> Path:
        return self.account.home

    def env(self) -> dict[str, str]:
        return {
            "HOME": str(self.home),
            "PATH": f"{self.home}/.local/bin:/usr/bin:/bin",
            "LANG": "C.UTF-8",
            "USER": self.account.name,
            "LOGNAME": self.account.name,
        }

    def sh(self, script: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        """Run ``script`` with bash as the newcomer, from a project directory of theirs."""
        return subprocess.run(
            ["/bin/bash", "-euo", "pipefail", "-c", script],
            user=self.account.uid,
            group=self.account.gid,
            extra_groups=self.account.groups,
            env=self.env(),
            cwd=self.home,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def ok(self, script: str, timeout: float = 300) -> str:
        done = self.sh(script, timeout)
        assert done.returncode == 0, (
            f"{script}\n--- stdout\n{done.stdout}\n--- stderr\n{done.stderr}"
        )
        return done.stdout


def _run_root(argv: list[str], timeout: float = 600) -> None:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    assert done.returncode == 0, f"{argv}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"


@pytest.fixture(scope="module")
def newcomer() -> Iterator[Newcomer]:
    if os.geteuid() != 0:
        if os.environ.get("CI") == "true":
            pytest.fail("the installed-distribution test needs root in CI")
        pytest.skip("needs root to create a throw-away user")
    require("bwrap", "xvfb-run", "dbus-run-session", "man", "desktop-file-validate")
    name = f"ollie-pkg-{secrets.token_hex(3)}"
    base = shared_dir("ollie-dist-")
    dist, house = base / "dist", base / "wheelhouse"
    try:
        _run_root([sys.executable, "-m", "build", "--outdir", str(dist), str(REPO)], timeout=900)
        wheel = next(dist.glob("ollie_tray-*.whl"))
        pip = [sys.executable, "-m", "pip", "wheel", "--quiet", "--wheel-dir", str(house)]
        _run_root([*pip, str(wheel), "pipx", "pip", *BUILD_DEPENDENCIES], timeout=900)
        for path in base.rglob("*"):
            path.chmod(0o755 if path.is_dir() else 0o644)
        account = add_account(name, secrets.token_urlsafe(12))
        yield Newcomer(account, base, python_for(account))
    finally:
        remove_account(name)
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="module")
def venv_install(newcomer: Newcomer) -> Path:
    """The wheel installed non-editable into ``~/venv``; its bin directory."""
    wheel = next((newcomer.base / "dist").glob("ollie_tray-*.whl"))
    house = newcomer.base / "wheelhouse"
    newcomer.ok(
        f"{newcomer.python} -m venv ~/venv\n"
        f"~/venv/bin/pip install --quiet --no-index --find-links {house} {wheel}\n"
    )
    return newcomer.home / "venv" / "bin"


def _demo_tools(newcomer: Newcomer, bin_dir: Path) -> str:
    code = "from registry_core.paths import resources_dir as r; print(r() / 'examples' / 'tools')"
    return newcomer.ok(f"{bin_dir}/python -c {shlex.quote(code)}").strip()


def test_the_wheel_carries_its_resources_inside_the_package(
    newcomer: Newcomer, venv_install: Path
) -> None:
    tools = _demo_tools(newcomer, venv_install)
    assert "/site-packages/registry_core/_data/" in tools
    assert str(REPO) not in tools
    listing = newcomer.ok(f"ls -l {tools}")
    assert "-rwxr-xr-x" in next(line for line in listing.splitlines() if line.endswith(" greet"))


def test_list_call_and_sandbox_show_work_from_the_wheel(
    newcomer: Newcomer, venv_install: Path
) -> None:
    tools = _demo_tools(newcomer, venv_install)
    out = newcomer.ok(
        f"mkdir -p ~/project && cd ~/project\n"
        f"export OLLIE_TOOLS_PATH={tools}\n"
        f"{venv_install}/ollie-tools list\n"
        f"echo ---\n"
        f'{venv_install}/ollie-tools call greet --args \'{{"name": "Ada"}}\'\n'
        f"echo ---\n"
        f"{venv_install}/ollie-tools sandbox show\n"
    )
    listing, call, show = out.split("---\n")
    assert "greet" in listing
    assert "Ada" in call
    assert "default.yaml" in show


def test_the_tray_starts_with_and_without_demo_tools(
    newcomer: Newcomer, venv_install: Path
) -> None:
    socket_code = (
        "import os; from registry_core import paths; print(paths.elevate_socket(os.environ))"
    )
    for flags in ("--demo", ""):
        script = (
            f"sock=$({venv_install}/python -c {shlex.quote(socket_code)})\n"
            f"{venv_install}/ollie-tray {flags} > ~/tray.log 2>&1 &\n"
            "tray=$!\n"
            'for i in $(seq 1 600); do [ -S "$sock" ] && break; '
            "kill -0 $tray 2>/dev/null || { cat ~/tray.log; exit 1; }; sleep 0.1; done\n"
            '[ -S "$sock" ] || { echo "no socket"; cat ~/tray.log; exit 1; }\n'
            f"{venv_install}/ollie-tools list --all > /dev/null\n"
            # The socket is bound before the tray's D-Bus name is owned: retry Quit.
            f"for i in $(seq 1 100); do {venv_install}/ollie-tray --quit 2>/dev/null && break; "
            "sleep 0.2; done\n"
            "wait $tray\n"
            "cat ~/tray.log\n"
        )
        log = newcomer.ok(
            f"xvfb-run -a dbus-run-session -- bash -euo pipefail -c {shlex.quote(script)}",
            timeout=240,
        )
        assert "Traceback" not in log, log


def test_install_desktop_writes_valid_entries_icons_manuals_and_completions(
    newcomer: Newcomer, venv_install: Path
) -> None:
    newcomer.ok(f"{venv_install}/ollie-tray --install-desktop")
    share = newcomer.home / ".local" / "share"
    launchers = list((share / "applications").glob("*.desktop"))
    assert launchers
    for launcher in launchers:
        newcomer.ok(f"desktop-file-validate {launcher}")
        icon = next(
            line.removeprefix("Icon=")
            for line in launcher.read_text().splitlines()
            if line.startswith("Icon=")
        )
        assert (share / "icons" / "hicolor" / "scalable" / "apps" / f"{icon}.svg").is_file()
    for program in PROGRAMS:
        page = share / "man" / "man1" / f"{program}.1"
        text = newcomer.ok(f"MANWIDTH=80 man -l {page} | col -b")
        assert program in text and "--version" in text
        newcomer.ok(
            f"source {share}/bash-completion/completions/{program} && complete -p {program}"
        )
        assert (newcomer.home / ".config" / "fish" / "completions" / f"{program}.fish").is_file()
        assert (share / "zsh" / "site-functions" / f"_{program}").is_file()


def test_install_autostart_names_an_icon_the_theme_has(
    newcomer: Newcomer, venv_install: Path
) -> None:
    newcomer.ok(f"{venv_install}/ollie-tray --install-desktop")
    newcomer.ok(f"{venv_install}/ollie-tray --install-autostart")
    entries = list((newcomer.home / ".config" / "autostart").glob("*.desktop"))
    assert entries
    for entry in entries:
        newcomer.ok(f"desktop-file-validate {entry}")
        assert f"Exec={venv_install}/ollie-tray" in entry.read_text()
    newcomer.ok(f"{venv_install}/ollie-tray --remove-autostart")


def test_every_program_of_the_wheel_answers_version_and_help(
    newcomer: Newcomer, venv_install: Path
) -> None:
    for program in PROGRAMS:
        version = newcomer.ok(f"{venv_install}/{program} --version")
        assert program in version and "0+unknown" not in version
        assert "usage:" in newcomer.ok(f"{venv_install}/{program} --help")


def test_pipx_installs_the_sdist(newcomer: Newcomer) -> None:
    sdist = next((newcomer.base / "dist").glob("ollie_tray-*.tar.gz"))
    house = newcomer.base / "wheelhouse"
    newcomer.ok(
        f"{newcomer.python} -m venv ~/pipx-venv\n"
        f"~/pipx-venv/bin/pip install --quiet --no-index --find-links {house} pipx\n"
        f"PIP_NO_INDEX=1 PIP_FIND_LINKS={house} ~/pipx-venv/bin/pipx install {sdist}\n",
        timeout=600,
    )
    bin_dir = newcomer.home / ".local" / "bin"
    for program in PROGRAMS:
        assert (bin_dir / program).exists(), program
    tools = _demo_tools(
        newcomer, newcomer.home / ".local" / "share" / "pipx" / "venvs" / "ollie-tray" / "bin"
    )
    out = newcomer.ok(
        f"mkdir -p ~/project2 && cd ~/project2\n"
        f'OLLIE_TOOLS_PATH={tools} ollie-tools call greet --args \'{{"name": "Grace"}}\'\n'
        "ollie-tools sandbox show\n"
    )
    assert "Grace" in out
