"""The real kdialog and zenity front-ends on a real X server (Xvfb), driven by xdotool.

Every test asks one question through a prompter, waits for its window with
``xdotool search --sync``, presses keys as a person would, and checks the
answer that comes back: approve, deny (Enter must deny), deny always, the
remember choice, the sudo password typed into the masked field, and that
cancelling the question or deciding it elsewhere removes the dialog process.

Keys: the window is given the input focus (``xdotool windowfocus --sync``),
then ``xdotool key`` sends real key presses through XTEST.  ``xdotool key
--window`` is not used: when the key closes the dialog, the release event
fails with BadWindow and the key stays pressed in the X server, which
autorepeats and answers every later dialog.

Dialog environment: a private HOME, XDG_RUNTIME_DIR (0700) and XDG dirs, the
xcb Qt platform, no accessibility bridge, a D-Bus address that leads
nowhere (so no session bus daemon is autolaunched behind the test's back),
and no locale variables: the C locale a broker often gets from systemd.

Skipped when Xvfb, xdpyinfo, xdotool, kdialog or zenity is missing (the
reason names the apt-get command); under ``CI=true`` that is a failure.
Everything started here is stopped by PID.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import re
import shutil
import subprocess
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from harness_procs import stop_process

from registry_core.broker.ask.kdialog import KDialogPrompter
from registry_core.broker.ask.zenity import ZenityPrompter
from registry_core.broker.peer.identity import Requester
from registry_core.broker.question import (
    ActionDetails,
    Approval,
    ApprovalRequest,
    PasswordAnswer,
    PasswordRequest,
    Remember,
)
from registry_core.broker.wire.messages import ActionDisplay, Kind, PatternKind

pytestmark = [pytest.mark.realstack, pytest.mark.slow]

DEADLINE = 30.0
PACKAGES = {
    "Xvfb": "xvfb",
    "xdpyinfo": "x11-utils",
    "xdotool": "xdotool",
    "kdialog": "kdialog",
    "zenity": "zenity",
}
MARKER = "Pw-Marker-7f3a9c-pässwörd€"

DialogPrompter = KDialogPrompter | ZenityPrompter


def require(*programs: str) -> None:
    missing = [p for p in programs if shutil.which(p) is None]
    if not missing:
        return
    packages = " ".join(sorted({PACKAGES[p] for p in missing}))
    reason = f"needs {', '.join(missing)}: apt-get install -y {packages}"
    if os.environ.get("CI") == "true":
        pytest.fail(reason)
    pytest.skip(reason)


def _ready(number: int) -> bool:
    if not os.path.exists(f"/tmp/.X11-unix/X{number}"):
        return False
    probe = subprocess.run(
        ["xdpyinfo", "-display", f":{number}"], capture_output=True, timeout=10, check=False
    )
    return probe.returncode == 0


def _start_xvfb(number: int, log: Path) -> subprocess.Popen[bytes] | None:
    with log.open("ab") as out:
        proc = subprocess.Popen(
            # -noreset: by default the server resets when its last client leaves, and a
            # connection made during the reset fails ("Can't open display").
            ["Xvfb", f":{number}", "-nolisten", "tcp", "-noreset", "-screen", "0", "1280x1024x24"],
            stdout=subprocess.DEVNULL,
            stderr=out,
            start_new_session=True,
        )
    deadline = DEADLINE
    while deadline > 0:
        if proc.poll() is not None:  # display taken after all (a race): try another
            return None
        if _ready(number):
            return proc
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(0.05)  # a bounded poll interval, not a guess at how long startup takes
        deadline -= 0.05
    stop_process(proc, 5)
    pytest.fail(f"Xvfb :{number} did not come up: {log.read_text()[-2000:]}")


@pytest.fixture(scope="module")
def display(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    require("Xvfb", "xdpyinfo", "xdotool")
    log = tmp_path_factory.mktemp("xvfb") / "xvfb.log"
    for number in range(160, 400):
        if os.path.exists(f"/tmp/.X11-unix/X{number}") or os.path.exists(f"/tmp/.X{number}-lock"):
            continue
        proc = _start_xvfb(number, log)
        if proc is not None:
            break
    else:
        pytest.fail("no free X display number between :160 and :399")
    try:
        yield f":{number}"
    finally:
        stop_process(proc, 5)


@pytest.fixture(scope="module")
def dialog_env(display: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("dialogs")
    env = {
        "PATH": os.environ.get("PATH", os.defpath),
        "DISPLAY": display,
        "HOME": str(root / "home"),
        "XDG_RUNTIME_DIR": str(root / "run"),
        "XDG_CONFIG_HOME": str(root / "config"),
        "XDG_CACHE_HOME": str(root / "cache"),
        "XDG_DATA_HOME": str(root / "data"),
        "QT_QPA_PLATFORM": "xcb",
        "NO_AT_BRIDGE": "1",
        "DBUS_SESSION_BUS_ADDRESS": f"unix:path={root / 'no-bus'}",
        # No LANG: the C locale, as under systemd or cron (zenity needs help there).
    }
    for key in ("HOME", "XDG_RUNTIME_DIR", "XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME"):
        Path(env[key]).mkdir(mode=0o700)
    return env


@pytest.fixture(params=["kdialog", "zenity"])
def prompter(request: pytest.FixtureRequest, dialog_env: dict[str, str]) -> DialogPrompter:
    require(request.param)
    made = KDialogPrompter(dialog_env) if request.param == "kdialog" else ZenityPrompter(dialog_env)
    assert made.available()
    return made


@pytest.fixture
def kdialog(dialog_env: dict[str, str]) -> KDialogPrompter:
    require("kdialog")
    return KDialogPrompter(dialog_env)


@pytest.fixture
def zenity(dialog_env: dict[str, str]) -> ZenityPrompter:
    require("zenity")
    return ZenityPrompter(dialog_env)


@pytest.fixture
def tool(request: pytest.FixtureRequest) -> Iterator[str]:
    """A tool name unique to this test and this run (others may run the suite at the same
    time): window titles and the process list are searched for it."""
    test = "".join(c if c.isalnum() else "_" for c in request.node.name)[:40]
    name = f"xt{os.getpid()}_{test}"
    yield name
    assert processes_showing(name) == [], "a dialog process outlived its test"


# --- the person at the X display ---------------------------------------------------------


class Person:
    def __init__(self, display: str) -> None:
        self.env = {**os.environ, "DISPLAY": display}

    def _xdotool(self, *args: str, timeout: float = DEADLINE) -> str:
        done = subprocess.run(
            ["xdotool", *args], env=self.env, capture_output=True, timeout=timeout, check=False
        )
        if done.returncode != 0:
            raise AssertionError(f"xdotool {' '.join(args)} failed: {done.stderr!r}")
        return done.stdout.decode()

    async def window(self, title: str) -> str:
        """The id of the visible window whose title matches ``title`` (waits for it)."""
        out = await asyncio.to_thread(
            self._xdotool, "search", "--sync", "--onlyvisible", "--name", title
        )
        return out.split()[0]

    async def press(self, window: str, *keys: str) -> None:
        await asyncio.to_thread(self._xdotool, "windowfocus", "--sync", window)
        await asyncio.to_thread(self._xdotool, "key", "--delay", "60", *keys)

    async def type(self, window: str, text: str) -> None:
        await asyncio.to_thread(self._xdotool, "windowfocus", "--sync", window)
        # xdotool types a character missing from the keymap by remapping a spare
        # keycode; back to back, such remaps can lose a character. One call (and a
        # slower pace) per non-ASCII character keeps every keystroke.
        for run in re.findall(r"[\x00-\x7f]+|[^\x00-\x7f]", text):
            delay = "30" if run.isascii() else "150"
            await asyncio.to_thread(self._xdotool, "type", "--delay", delay, run)

    def windows(self, title: str) -> list[str]:
        done = subprocess.run(
            ["xdotool", "search", "--onlyvisible", "--name", title],
            env=self.env,
            capture_output=True,
            timeout=DEADLINE,
            check=False,
        )
        return done.stdout.decode().split()


@pytest.fixture
def person(display: str) -> Person:
    return Person(display)


def processes_showing(text: str) -> list[int]:
    """PIDs of processes whose command line mentions ``text`` (our dialogs carry the tool)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        with contextlib.suppress(OSError):
            if text.encode() in Path(f"/proc/{entry}/cmdline").read_bytes():
                found.append(int(entry))
    return found


def make_request(tool: str, **changes: Any) -> ApprovalRequest:
    request = ApprovalRequest(
        id=f"id-{tool}",
        tool=tool,
        kind=Kind.SUDO,
        description="A test tool <b>not bold</b> & friends",
        variant=None,
        executable=f"/usr/local/bin/{tool}",
        sha256="ef" * 32,
        argv=("sudo", "-A", "--", f"/usr/local/bin/{tool}"),
        args={"path": "/var/log"},
        cwd="/tmp",
        requester=Requester(pid=os.getpid(), uid=os.getuid(), gid=os.getgid(), exe="/usr/bin/x"),
        host="localhost",
        timeout=60.0,
    )
    return dataclasses.replace(request, **changes)


def password_request(tool: str, attempt: int = 1) -> PasswordRequest:
    return PasswordRequest(
        id=f"pw-{tool}",
        approval=make_request(tool),
        prompt="[sudo] password for tester: ",
        user="tester",
        attempt=attempt,
    )


def run(scenario: Callable[[], Awaitable[Any]]) -> Any:
    async def main() -> Any:
        return await asyncio.wait_for(scenario(), DEADLINE * 3)

    return asyncio.run(main())


async def answer_approval(
    prompter: DialogPrompter, request: ApprovalRequest, act: Callable[[], Awaitable[None]]
) -> Approval:
    task = asyncio.ensure_future(prompter.ask_approval(request))
    try:
        await act()
        return await asyncio.wait_for(task, DEADLINE)
    finally:
        if not task.done():  # the test failed: take the dialog away before the loop ends
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


# --- both programs -----------------------------------------------------------------------


def test_password_comes_back(prompter: DialogPrompter, person: Person, tool: str) -> None:
    async def scenario() -> PasswordAnswer:
        task = asyncio.ensure_future(prompter.ask_password(password_request(tool, attempt=2)))
        window = await person.window(f"sudo password for {tool}")
        assert processes_showing(MARKER) == []
        await person.type(window, MARKER)
        await person.press(window, "Return")
        return await asyncio.wait_for(task, DEADLINE)

    answer = run(scenario)
    assert answer == PasswordAnswer(MARKER)
    assert processes_showing(MARKER) == []  # never in any argv


def test_password_cancelled(prompter: DialogPrompter, person: Person, tool: str) -> None:
    async def scenario() -> PasswordAnswer:
        task = asyncio.ensure_future(prompter.ask_password(password_request(tool)))
        window = await person.window(f"sudo password for {tool}")
        await person.type(window, "half")
        await person.press(window, "Escape")
        return await asyncio.wait_for(task, DEADLINE)

    assert run(scenario) == PasswordAnswer(None)


def test_cancel_kills_the_dialog(prompter: DialogPrompter, person: Person, tool: str) -> None:
    async def scenario() -> None:
        task = asyncio.ensure_future(prompter.ask_approval(make_request(tool)))
        await person.window(f"approve {tool}")
        assert processes_showing(tool) != []
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    run(scenario)
    assert processes_showing(tool) == []
    assert person.windows(tool) == []
    assert prompter.open_dialogs() == 0


def test_decided_elsewhere_kills_the_dialog(
    prompter: DialogPrompter, person: Person, tool: str
) -> None:
    request = make_request(tool)

    async def scenario() -> Approval:
        task = asyncio.ensure_future(prompter.ask_approval(request))
        await person.window(f"approve {tool}")
        prompter.request_decided(request.id, False, "timeout")
        return await asyncio.wait_for(task, DEADLINE)

    assert run(scenario) == Approval(False, Remember.ONCE, "withdrawn: decided by timeout")
    assert processes_showing(tool) == []


# --- kdialog -----------------------------------------------------------------------------


def test_kdialog_approve_once(kdialog: KDialogPrompter, person: Person, tool: str) -> None:
    async def act() -> None:
        await person.press(await person.window(f"approve {tool}"), "Return")  # Approve
        how_long = await person.window(f"how long to approve {tool}")
        await person.press(how_long, "Down", "Return")  # "Only this time"

    approval = run(lambda: answer_approval(kdialog, make_request(tool), act))
    assert approval == Approval(True, Remember.ONCE, "approved in kdialog")


def test_kdialog_enter_twice_denies(kdialog: KDialogPrompter, person: Person, tool: str) -> None:
    async def act() -> None:
        await person.press(await person.window(f"approve {tool}"), "Return")
        await person.press(await person.window(f"how long to approve {tool}"), "Return")

    approval = run(lambda: answer_approval(kdialog, make_request(tool), act))
    assert approval == Approval(False, Remember.ONCE, "denied in kdialog (no duration chosen)")


def test_kdialog_deny_button(kdialog: KDialogPrompter, person: Person, tool: str) -> None:
    async def act() -> None:
        await person.press(await person.window(f"approve {tool}"), "Tab", "Return")

    approval = run(lambda: answer_approval(kdialog, make_request(tool), act))
    assert approval == Approval(False, Remember.ONCE, "denied in kdialog")


def test_kdialog_escape_denies(kdialog: KDialogPrompter, person: Person, tool: str) -> None:
    async def act() -> None:
        await person.press(await person.window(f"approve {tool}"), "Escape")

    approval = run(lambda: answer_approval(kdialog, make_request(tool), act))
    assert approval == Approval(False, Remember.ONCE, "kdialog closed without an answer")


# --- zenity ------------------------------------------------------------------------------


def test_zenity_enter_denies(zenity: ZenityPrompter, person: Person, tool: str) -> None:
    async def act() -> None:
        await person.press(await person.window(f"approve {tool}"), "Return")

    approval = run(lambda: answer_approval(zenity, make_request(tool), act))
    assert approval == Approval(False, Remember.ONCE, "denied in zenity")


def test_zenity_approve_for_the_session(zenity: ZenityPrompter, person: Person, tool: str) -> None:
    async def act() -> None:
        await person.press(await person.window(f"approve {tool}"), "Tab", "Return")  # Approve
        how_long = await person.window(f"how long to approve {tool}")
        await person.press(how_long, "Down", "Return")  # the second row

    approval = run(lambda: answer_approval(zenity, make_request(tool), act))
    assert approval == Approval(True, Remember.SESSION, "approved in zenity")


def test_zenity_deny_always(zenity: ZenityPrompter, person: Person, tool: str) -> None:
    async def act() -> None:
        await person.press(await person.window(f"approve {tool}"), "shift+Tab", "Return")

    approval = run(lambda: answer_approval(zenity, make_request(tool), act))
    assert approval == Approval(False, Remember.DENY_ALWAYS, "denied always in zenity")


def test_zenity_long_request_needs_the_checkbox(
    zenity: ZenityPrompter, person: Person, tool: str
) -> None:
    code = "\n".join(f"echo step {i} && true" for i in range(80))
    request = make_request(tool, code=code)

    async def enter_then_escape() -> None:
        window = await person.window(f"approve {tool}")
        await person.press(window, "Return")  # Approve is disabled: nothing happens
        await person.press(window, "Escape")

    denied = run(lambda: answer_approval(zenity, request, enter_then_escape))
    assert denied == Approval(False, Remember.ONCE, "denied in zenity")

    async def tick_and_approve() -> None:
        window = await person.window(f"approve {tool}")
        # tick "I have read", Approve: free-form code is approved once, so no "how long" list
        await person.press(window, "Tab", "space", "Return")

    approved = run(lambda: answer_approval(zenity, request, tick_and_approve))
    assert approved == Approval(True, Remember.ONCE, "approved in zenity")


# --- an agent's action: the remember pattern, edited in the dialog program ----------------

PROJECT_FILE = "/home/a/proj/src/app.py"


def action_request(tool: str) -> ApprovalRequest:
    """An agent's file edit (``ollie-approve``), the agent tool named ``tool``; remember
    suggests the file itself."""
    details = ActionDetails(
        agent="claude-code",
        tool=tool,
        summary=f"edit {PROJECT_FILE}",
        detail="--- a\n+++ b\n-old\n+new",
        display=ActionDisplay.DIFF,
        command=None,
        path=PROJECT_FILE,
        pattern_kind=PatternKind.PATH,
        pattern=PROJECT_FILE,
    )
    return make_request(tool, kind=Kind.SANDBOX, argv=(), executable=None, action=details)


# Keys that reach "Always" in each program's how-long list (see the tests above).
ALWAYS_KEYS = {"kdialog": ("Down",) * 5, "zenity": ("Down",) * 4}
APPROVE_KEYS = {"kdialog": ("Return",), "zenity": ("Tab", "Return")}


async def approve_always(person: Person, name: str, tool: str) -> str:
    """Approve the action for always; returns the pattern window once it is shown."""
    await person.press(await person.window(f"to use {tool}"), *APPROVE_KEYS[name])
    how_long = await person.window(f"how long to approve {tool}")
    await person.press(how_long, *ALWAYS_KEYS[name], "Return")
    return await person.window(f"remember for which {tool} actions")


def test_action_pattern_is_edited_in_the_dialog(
    prompter: DialogPrompter, person: Person, tool: str
) -> None:
    async def act() -> None:
        entry = await approve_always(person, prompter.name, tool)
        await person.press(entry, "ctrl+a")
        await person.type(entry, "/home/a/proj/")
        await person.press(entry, "Return")

    approval = run(lambda: answer_approval(prompter, action_request(tool), act))
    reason = f"approved in {prompter.name}"
    assert approval == Approval(True, Remember.ALWAYS, reason, "/home/a/proj/")


def test_action_pattern_kept_as_suggested_with_enter(
    prompter: DialogPrompter, person: Person, tool: str
) -> None:
    async def act() -> None:
        await person.press(await approve_always(person, prompter.name, tool), "Return")

    approval = run(lambda: answer_approval(prompter, action_request(tool), act))
    reason = f"approved in {prompter.name}"
    assert approval == Approval(True, Remember.ALWAYS, reason, PROJECT_FILE)


def test_action_pattern_escape_remembers_nothing(
    prompter: DialogPrompter, person: Person, tool: str
) -> None:
    async def act() -> None:
        await person.press(await approve_always(person, prompter.name, tool), "Escape")

    approval = run(lambda: answer_approval(prompter, action_request(tool), act))
    assert approval.approved and approval.remember is Remember.ONCE and approval.pattern is None
    assert "not remembered" in approval.reason
