"""Programs the trusted side runs never come from ``PATH``: real processes.

An agent commonly runs with a directory of the project first on ``PATH``
(``.venv/bin``, ``node_modules/.bin``), and a sandboxed tool can write its
working directory.  Each test plants a program of the same name first on the
dispatcher's or the prompter's ``PATH``: the planted program would leave a
marker file (and then run the genuine one, so only the marker tells them
apart).  The marker must stay absent, and the genuine program must have run.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import pytest

from registry_core.broker.ask.dialog_process import DialogError, DialogProcesses
from registry_core.broker.ask.kdialog import KDialogPrompter
from registry_core.broker.ask.zenity import ZenityPrompter
from registry_core.dispatch import Authorization, CallOptions, Dispatcher, ElevationRequest
from registry_core.dispatch.gate_choice import askpass_program
from registry_core.registry import RegistryLoader
from registry_core.trusted import find_trusted

pytestmark = pytest.mark.realstack


def plant(directory: Path, name: str, marker: Path) -> Path:
    """``directory/name``: records that it ran in ``marker``, then runs the genuine program."""
    directory.mkdir(exist_ok=True)
    path = directory / name
    genuine = find_trusted(name) or f"/usr/bin/{name}"
    path.write_text(f'#!/bin/sh\necho "$0 $*" >>{marker}\nexec {genuine} "$@"\n')
    path.chmod(0o755)
    return path


def require(name: str) -> str:
    found = find_trusted(name)
    if found is None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{name} is not installed in a system directory")
        pytest.skip(f"{name} is not installed in a system directory")
    return found


class ApprovingGate:
    """Approves every request and keeps it: the argv the dispatcher sends is the subject."""

    def __init__(self) -> None:
        self.requests: list[ElevationRequest] = []

    def authorize(self, request: ElevationRequest) -> Authorization:
        self.requests.append(request)
        return Authorization(reason="approved by the test")

    def report_sudo(self, grant: str, exit_code: int, auth_failed: bool) -> str | None:
        return None


def project(tmp_path: Path) -> tuple[dict[str, str], Path, Path, Path]:
    """An isolated environment whose ``PATH`` starts with the project's ``.venv/bin``."""
    for sub in ("home", "config", "runtime", "tmp", "tools", "work"):
        (tmp_path / sub).mkdir()
    planted = tmp_path / "work" / ".venv" / "bin"
    planted.mkdir(parents=True)
    env = {
        "PATH": f"{planted}:/usr/local/bin:/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "HOME": str(tmp_path / "home"),
        "TMPDIR": str(tmp_path / "tmp"),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "XDG_RUNTIME_DIR": str(tmp_path / "runtime"),
    }
    return env, tmp_path / "tools", tmp_path / "work", planted


def tool(tools: Path, name: str, script: str, **meta: Any) -> Path:
    (tools / f"{name}.meta").write_text(json.dumps({"description": f"{name}.", **meta}))
    exe = tools / name
    exe.write_text(script)
    exe.chmod(0o755)
    return exe


def test_a_bwrap_planted_first_on_the_dispatchers_path_never_runs(
    tmp_path: Path, landlock_abi: int
) -> None:
    genuine = require("bwrap")
    env, tools, work, planted = project(tmp_path)
    marker = tmp_path / "planted-ran"
    plant(planted, "bwrap", marker)
    tool(tools, "hello", "#!/bin/sh\necho hello from the sandbox\n")
    registry = RegistryLoader([tools], env).load()
    dispatcher = Dispatcher(registry=lambda: registry, env=env)
    result = dispatcher.call("hello", {}, CallOptions(cwd=str(work)))
    assert not marker.exists(), "the planted program ran"
    assert (result.exit_code, result.stdout, result.sandboxed) == (
        0,
        "hello from the sandbox\n",
        True,
    )
    assert dispatcher.bwrap() == genuine


def test_a_sudo_planted_first_on_the_dispatchers_path_never_runs(tmp_path: Path) -> None:
    genuine = require("sudo")
    if os.geteuid() != 0:
        pytest.skip("the genuine sudo runs here without a password only for root")
    askpass = askpass_program()
    assert askpass is not None, "ollie-askpass is installed next to this interpreter"
    env, tools, work, planted = project(tmp_path)
    marker = tmp_path / "planted-ran"
    plant(planted, "sudo", marker)
    exe = tool(tools, "rooty", "#!/bin/sh\nid -u\n", sudo=True)
    registry = RegistryLoader([tools], env).load()
    gate = ApprovingGate()
    dispatcher = Dispatcher(registry=lambda: registry, env=env, gate=gate, askpass=askpass)
    result = dispatcher.call("rooty", {}, CallOptions(cwd=str(work)))
    assert not marker.exists(), "the planted program ran"
    assert (result.exit_code, result.stdout, result.sudo) == (0, "0\n", True), result.stderr
    [request] = gate.requests
    # The broker is told the absolute path of the sudo that runs, and that is what ran.
    assert request.argv[0] == genuine
    assert result.argv[0] == genuine
    assert request.argv[-1] == str(exe) or request.argv[-1].startswith("/")


@pytest.mark.parametrize("name", ["kdialog", "zenity"])
def test_a_dialog_planted_first_on_the_prompters_path_never_runs(tmp_path: Path, name: str) -> None:
    genuine = require(name)
    marker = tmp_path / "planted-ran"
    planted = plant(tmp_path / "bin", name, marker)
    # No X server answers on this display: the genuine program starts and fails.
    env = {"PATH": f"{planted.parent}:/usr/bin:/bin", "DISPLAY": ":97"}
    processes = DialogProcesses(name, env, answers=())  # any exit is reported, with its status
    question = {"kdialog": ["--msgbox", "x"], "zenity": ["--info", "--text", "x"]}[name]
    with pytest.raises(DialogError) as raised:
        asyncio.run(asyncio.wait_for(processes.run(["req-1"], question), 30))
    assert not marker.exists(), "the planted program ran"
    assert raised.value.status is not None  # it ran (and could not open the display)
    assert processes.which() == genuine
    front_end = {"kdialog": KDialogPrompter, "zenity": ZenityPrompter}[name](env)
    assert front_end.available()  # the genuine program, found without PATH


def test_a_prompter_without_a_trusted_dialog_is_not_available(tmp_path: Path) -> None:
    marker = tmp_path / "planted-ran"
    plant(tmp_path / "bin", "not-a-real-dialog", marker)
    processes = DialogProcesses("not-a-real-dialog", {"PATH": str(tmp_path / "bin")})
    assert processes.which() is None
    assert not processes.available()
    with pytest.raises(DialogError) as raised:
        asyncio.run(processes.run(["req-1"], []))
    assert not marker.exists()
    assert raised.value.status is None
    assert "not-a-real-dialog" in str(raised.value)
    assert "/usr/bin" in raised.value.detail  # where it was looked for
