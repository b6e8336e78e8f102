"""The dispatcher's contract (spec "Input/Output contract", "Environment Variables").

Every call goes through the real :class:`Dispatcher` with small tools written
into a temporary tools directory, in an isolated environment: ``HOME``,
``XDG_CONFIG_HOME``, ``XDG_RUNTIME_DIR`` and ``TMPDIR`` all live in
``tmp_path``, so the default sandbox profile is installed there on first use.
"""

from __future__ import annotations

import json
import os
import select
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from registry_core.dispatch import (
    Authorization,
    CallOptions,
    CallResult,
    Dispatcher,
    ElevationRequest,
    Kind,
    sandbox_path,
    validate_args,
)
from registry_core.dispatch.dispatcher import DEFAULT_TIMEOUT, RulesCache
from registry_core.dispatch.process import OUTPUT_LIMIT
from registry_core.errors import (
    ArgumentsError,
    ElevationDeniedError,
    ExecutableError,
    ProfileError,
    ToolNotFoundError,
    ToolUnavailableError,
)
from registry_core.paths import resources_dir
from registry_core.registry import Registry, RegistryLoader
from registry_core.sandbox import Access, EffectiveRules, NetworkPolicy, PathRule, abi_version
from registry_core.sandbox.profile import NetworkMode

SHIPPED_PROFILE = resources_dir() / "sandbox" / "default.yaml"
HAS_LANDLOCK = abi_version() >= 1

ECHO = "#!/usr/bin/python3\nimport sys\nsys.stdout.write(sys.stdin.read())\n"
MARKER = "#!/bin/sh\ncat >/dev/null\ntouch ran\necho ran\n"
ENV_DUMP = """#!/usr/bin/python3
import json, os, sys
sys.stdin.read()
print(json.dumps({"env": dict(os.environ), "cwd": os.getcwd()}))
"""


class FakeGate:
    """Records every elevation request; approves or denies all of them."""

    def __init__(self, approve: bool) -> None:
        self.approve = approve
        self.requests: list[ElevationRequest] = []
        self.reports: list[tuple[str, int, bool]] = []

    def authorize(self, request: ElevationRequest) -> Authorization:
        self.requests.append(request)
        if not self.approve:
            raise ElevationDeniedError("fake gate says no")
        return Authorization(reason="fake gate says yes")

    def report_sudo(self, grant: str, exit_code: int, auth_failed: bool) -> None:
        self.reports.append((grant, exit_code, auth_failed))


@dataclass
class Stack:
    """An isolated home, config, runtime dir, tools dir and working directory."""

    root: Path
    env: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for sub in ("home", "config", "runtime", "tmp", "tools", "work", "bin"):
            (self.root / sub).mkdir()
        self.env = {
            "PATH": f"{self.root / 'bin'}:/usr/local/bin:/usr/bin:/bin",
            "LANG": "C.UTF-8",
            "HOME": str(self.home),
            "TMPDIR": str(self.root / "tmp"),
            "XDG_CONFIG_HOME": str(self.root / "config"),
            "XDG_RUNTIME_DIR": str(self.root / "runtime"),
            "DISPLAY": ":42",
            "DBUS_SESSION_BUS_ADDRESS": f"unix:path={self.root / 'runtime' / 'bus'}",
            "SSH_AUTH_SOCK": str(self.root / "runtime" / "ssh-agent.sock"),
            "SECRET_TOKEN": "do-not-leak",
        }
        if not HAS_LANDLOCK:
            # No Landlock here: keep the contract testable (CI has Landlock and
            # exercises the real default profile).
            self.profile_path("default").parent.mkdir(parents=True)
            text = SHIPPED_PROFILE.read_text().replace("best_effort: false", "best_effort: true")
            self.profile_path("default").write_text(text)

    @property
    def home(self) -> Path:
        return self.root / "home"

    @property
    def tools(self) -> Path:
        return self.root / "tools"

    @property
    def cwd(self) -> Path:
        return self.root / "work"

    def profile_path(self, name: str) -> Path:
        return self.root / "config" / "ollie" / "sandbox" / f"{name}.yaml"

    def write_profile(self, name: str, data: dict[str, Any] | str) -> Path:
        path = self.profile_path(name)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(data if isinstance(data, str) else yaml.safe_dump(data))
        return path

    def default_profile_with(self, **changes: Any) -> dict[str, Any]:
        data: dict[str, Any] = yaml.safe_load(SHIPPED_PROFILE.read_text())
        data.update(changes)
        if not HAS_LANDLOCK:
            data["general"]["best_effort"] = True
        return data

    def tool(
        self, name: str, script: str | None = None, directory: Path | None = None, **meta: Any
    ) -> Path:
        where = directory or self.tools
        where.mkdir(exist_ok=True)
        (where / f"{name}.meta").write_text(json.dumps({"description": f"{name}.", **meta}))
        exe = where / name
        if script is not None:
            exe.write_text(script)
            exe.chmod(0o755)
        return exe

    def registry(self, *dirs: Path) -> Registry:
        return RegistryLoader(list(dirs) or [self.tools], self.env).load()

    def dispatcher(self, *dirs: Path, gate: Any = None) -> Dispatcher:
        registry = self.registry(*dirs)
        if gate is None:
            return Dispatcher(registry=lambda: registry, env=self.env)
        return Dispatcher(registry=lambda: registry, env=self.env, gate=gate)

    def call(self, name: str, args: Any = None, **options: Any) -> CallResult:
        dispatcher = self.dispatcher()
        return dispatcher.call(name, {} if args is None else args, self.options(**options))

    def options(self, **options: Any) -> CallOptions:
        return CallOptions(cwd=str(self.cwd), **options)


@pytest.fixture
def stack(tmp_path: Path) -> Stack:
    return Stack(tmp_path)


def pid_gone(pid: int, timeout: float = 10.0) -> bool:
    """True once ``pid`` has exited (zombie or reaped); waits on a pidfd, no polling."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        readable, _, _ = select.select([fd], [], [], timeout)
        return bool(readable)
    finally:
        os.close(fd)


def assert_gone(pid: int, what: str) -> None:
    """Fail when ``pid`` survived; a survivor is killed so a failing run leaves nothing behind."""
    if not pid_gone(pid):
        os.kill(pid, signal.SIGKILL)
        pytest.fail(f"{what} (pid {pid}) survived the timeout")


# --- stdin / stdout / exit codes ---------------------------------------------


def test_args_arrive_as_one_json_object_on_stdin(stack: Stack) -> None:
    stack.tool("echo", ECHO)
    args = {"path": "/tmp/x", "count": 3, "nested": {"list": [1, "zwei", None]}, "ü": "ß"}
    result = stack.call("echo", args)
    assert result.ok
    assert result.exit_code == 0
    assert json.loads(result.stdout) == args
    assert result.content == [{"type": "text", "text": result.stdout}]
    assert result.structured is False
    assert result.error == ""


def test_stdout_and_stderr_are_captured_separately(stack: Stack) -> None:
    stack.tool("both", "#!/bin/sh\ncat >/dev/null\necho out\necho err >&2\n")
    result = stack.call("both")
    assert (result.stdout, result.stderr) == ("out\n", "err\n")
    assert result.content == [{"type": "text", "text": "out\n"}]


def test_nonzero_exit_is_an_error_with_the_message_from_stdout(stack: Stack) -> None:
    stack.tool("fail", "#!/bin/sh\ncat >/dev/null\necho 'no such unit'\necho detail >&2\nexit 3\n")
    result = stack.call("fail")
    assert not result.ok
    assert result.exit_code == 3
    assert result.error == "no such unit"
    assert result.content == [{"type": "text", "text": "no such unit\n"}]


def test_nonzero_exit_without_stdout_takes_the_message_from_stderr(stack: Stack) -> None:
    stack.tool("fail", "#!/bin/sh\ncat >/dev/null\necho 'permission trouble' >&2\nexit 1\n")
    result = stack.call("fail")
    assert result.exit_code == 1
    assert result.error == "permission trouble"
    assert result.content == [{"type": "text", "text": "permission trouble\n"}]


def test_nonzero_exit_without_any_output_names_the_status(stack: Stack) -> None:
    stack.tool("fail", "#!/bin/sh\ncat >/dev/null\nexit 5\n")
    assert stack.call("fail").error == "exit status 5"


def test_structured_output_is_passed_through_as_blocks(stack: Stack) -> None:
    blocks = [
        {"type": "text", "text": "line one"},
        {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"},
    ]
    script = f"#!/bin/sh\ncat >/dev/null\ncat <<'EOF'\n{json.dumps({'content': blocks})}\nEOF\n"
    stack.tool("structured", script)
    result = stack.call("structured")
    assert result.ok
    assert result.structured is True
    assert result.content == blocks


@pytest.mark.parametrize(
    "stdout",
    [
        '{"result": "no content key"}',
        '{"content": "not a list"}',
        '{"content": ["not an object"]}',
        '[{"type": "text", "text": "an array"}]',
        '{"content": [{"type": "text"}',
        "plain words",
    ],
)
def test_anything_else_is_one_text_block(stack: Stack, stdout: str) -> None:
    stack.tool("text", f"#!/bin/sh\ncat >/dev/null\ncat <<'EOF'\n{stdout}\nEOF\n")
    result = stack.call("text")
    assert result.structured is False
    assert result.content == [{"type": "text", "text": stdout + "\n"}]


# --- argument validation ----------------------------------------------------

SCHEMA = {
    "type": "object",
    "required": ["path"],
    "properties": {
        "path": {"type": "string"},
        "count": {"type": "integer", "minimum": 0},
        "items": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["name"],
                "properties": {"name": {"type": "string"}},
            },
        },
    },
    "additionalProperties": False,
}


@pytest.mark.parametrize(
    ("args", "field_name", "words"),
    [
        ({}, "path", "is required"),
        ({"path": 7}, "path", "is not of type 'string'"),
        ({"path": "p", "count": -1}, "count", "minimum"),
        ({"path": "p", "items": [{}]}, "items[0].name", "is required"),
        ({"path": "p", "items": [{"name": "a"}, {"name": 2}]}, "items[1].name", "'string'"),
        ({"path": "p", "items": "x"}, "items", "'array'"),
        ([1, 2], "(arguments)", "must be a JSON object"),
    ],
)
def test_schema_violation_names_the_field_and_nothing_runs(
    stack: Stack, args: Any, field_name: str, words: str
) -> None:
    stack.tool("strict", MARKER, args=SCHEMA)
    with pytest.raises(ArgumentsError) as caught:
        stack.call("strict", args)
    assert caught.value.field == field_name
    assert caught.value.tool == "strict"
    assert words in str(caught.value)
    assert field_name in str(caught.value)
    assert not (stack.cwd / "ran").exists()


def test_unexpected_property_is_a_violation(stack: Stack) -> None:
    stack.tool("strict", MARKER, args=SCHEMA)
    with pytest.raises(ArgumentsError, match="extra"):
        stack.call("strict", {"path": "p", "extra": 1})
    assert not (stack.cwd / "ran").exists()


def test_valid_args_run_the_tool(stack: Stack) -> None:
    stack.tool("strict", MARKER, args=SCHEMA)
    result = stack.call("strict", {"path": "p", "items": [{"name": "a"}]})
    assert result.ok, result.error
    assert (stack.cwd / "ran").exists()


def test_validate_args_accepts_anything_when_the_schema_is_empty(stack: Stack) -> None:
    stack.tool("free", MARKER)
    tool = stack.registry().get("free")
    validate_args(tool, {"whatever": [1, {"x": None}]})
    with pytest.raises(ArgumentsError):
        validate_args(tool, "not an object")


# --- environment -------------------------------------------------------------


def test_tool_environment_is_the_allowlist_plus_the_spec_variables(stack: Stack) -> None:
    stack.tool("envdump", ENV_DUMP)
    result = stack.call("envdump")
    assert result.ok, result.error
    seen = json.loads(result.stdout)
    env = seen["env"]
    assert set(env) == {
        "PATH",
        "LANG",
        "HOME",
        "TMPDIR",
        "OLLIE_TOOLS_PATH",
        "OLLIE_ELEVATE_SOCKET",
        "PWD",
    }
    assert env["OLLIE_TOOLS_PATH"] == str(stack.tools)
    assert env["OLLIE_ELEVATE_SOCKET"] == str(stack.root / "runtime" / "ollie" / "elevate.sock")
    assert env["PWD"] == str(stack.cwd)
    assert os.path.realpath(seen["cwd"]) == os.path.realpath(stack.cwd)
    assert env["HOME"] == str(stack.home)
    # PATH keeps only directories the sandbox lets a tool execute from.
    assert env["PATH"] == "/usr/local/bin:/usr/bin:/bin"
    for hidden in ("DISPLAY", "DBUS_SESSION_BUS_ADDRESS", "SSH_AUTH_SOCK", "SECRET_TOKEN"):
        assert hidden not in env
    assert "do-not-leak" not in result.stdout


def test_default_profile_is_installed_on_first_use(stack: Stack) -> None:
    if not HAS_LANDLOCK:
        pytest.skip("the no-Landlock fallback pre-writes the profile")
    installed = stack.profile_path("default")
    assert not installed.exists()
    stack.tool("echo", ECHO)
    assert stack.call("echo", {"a": 1}).ok
    assert installed.read_bytes() == SHIPPED_PROFILE.read_bytes()


def test_the_callers_broker_socket_is_passed_on(stack: Stack) -> None:
    stack.env["OLLIE_ELEVATE_SOCKET"] = str(stack.root / "elsewhere.sock")
    stack.tool("envdump", ENV_DUMP)
    env = json.loads(stack.call("envdump").stdout)["env"]
    assert env["OLLIE_ELEVATE_SOCKET"] == str(stack.root / "elsewhere.sock")


def test_tools_path_lists_every_registry_directory(stack: Stack) -> None:
    second = stack.root / "more-tools"
    stack.tool("envdump", ENV_DUMP, directory=second)
    dispatcher = stack.dispatcher(stack.tools, second)
    result = dispatcher.call("envdump", {}, stack.options())
    assert json.loads(result.stdout)["env"]["OLLIE_TOOLS_PATH"] == f"{stack.tools}:{second}"


def test_socket_variables_pass_only_when_the_profile_lists_them(stack: Stack) -> None:
    names = ["PATH", "LANG", "HOME", "DISPLAY", "DBUS_SESSION_BUS_ADDRESS", "SSH_AUTH_SOCK"]
    stack.write_profile("desktop", stack.default_profile_with(env=names))
    stack.tool("envdump", ENV_DUMP)
    result = stack.call("envdump", profile="desktop")
    env = json.loads(result.stdout)["env"]
    assert env["DISPLAY"] == ":42"
    assert env["DBUS_SESSION_BUS_ADDRESS"] == stack.env["DBUS_SESSION_BUS_ADDRESS"]
    assert env["SSH_AUTH_SOCK"] == stack.env["SSH_AUTH_SOCK"]
    assert "SECRET_TOKEN" not in env
    assert "TMPDIR" not in env  # not listed in this profile
    assert {"OLLIE_TOOLS_PATH", "OLLIE_ELEVATE_SOCKET", "PWD"} <= set(env)


def test_sandbox_path_keeps_directories_under_executable_rules() -> None:
    rules = EffectiveRules(
        profile="p",
        source="/p.yaml",
        paths=(
            PathRule("/usr", Access.ROX, "t"),
            PathRule("/opt/tools", Access.RWX, "t"),
            PathRule("/home/u", Access.RW, "t"),
            PathRule("/etc", Access.RO, "t"),
        ),
        network=NetworkPolicy(NetworkMode.UNRESTRICTED),
        env=(),
        best_effort=False,
    )
    path = "/usr/bin::/home/u/.pyenv/shims:/opt/tools/bin:/etc:/usrlocal/bin:/usr"
    assert sandbox_path(rules, path) == "/usr/bin:/opt/tools/bin:/usr"


# --- timeouts and output limits ----------------------------------------------


def test_timeout_kills_the_tool_and_its_children(stack: Stack) -> None:
    script = "#!/bin/sh\necho $$ > parent.pid\nsleep 60 &\necho $! > child.pid\nexec sleep 60\n"
    stack.tool("sleeper", script)
    start = time.monotonic()
    result = stack.call("sleeper", timeout=2)
    elapsed = time.monotonic() - start
    assert elapsed < 30, "returned only after the child's sleep"
    assert result.timed_out
    assert not result.ok
    assert result.exit_code == 124
    assert "timed out after 2 s" in result.stderr
    assert "timed out after 2 s" in result.error
    for name in ("parent.pid", "child.pid"):
        assert_gone(int((stack.cwd / name).read_text()), name)


def test_fractional_timeout_is_reported_as_given(stack: Stack) -> None:
    stack.tool("sleeper", "#!/bin/sh\nexec sleep 60\n")
    result = stack.call("sleeper", timeout=0.5)
    assert result.timed_out
    assert result.stderr.endswith("timed out after 0.5 s")


def test_output_over_the_limit_is_cut_with_a_visible_marker(stack: Stack) -> None:
    script = (
        "#!/usr/bin/python3\nimport sys\nsys.stdin.read()\n"
        "sys.stdout.write('o' * 1_000_000)\nsys.stderr.write('e' * 300_000)\n"
    )
    stack.tool("loud", script)
    result = stack.call("loud", limit=1000)
    assert result.exit_code == 0  # the child was never blocked on a full pipe
    assert not result.timed_out
    assert result.truncated
    assert result.stdout == "o" * 1000 + (
        "\n[output truncated: 999000 bytes over the 1000 bytes limit]"
    )
    assert result.stderr == "e" * 1000 + (
        "\n[output truncated: 299000 bytes over the 1000 bytes limit]"
    )
    assert result.content == [{"type": "text", "text": result.stdout}]


def test_output_at_the_limit_is_not_truncated(stack: Stack) -> None:
    stack.tool("exact", "#!/bin/sh\ncat >/dev/null\nprintf '%01000d' 0\n")
    result = stack.call("exact", limit=1000)
    assert not result.truncated
    assert result.stdout == "0" * 1000


def test_call_options_defaults() -> None:
    options = CallOptions(cwd="/")
    assert options.timeout == DEFAULT_TIMEOUT == 60.0
    assert options.limit == OUTPUT_LIMIT == 10 * 1024 * 1024
    assert options.profile == "default"
    assert options.elevated is False


# --- errors ------------------------------------------------------------------


def test_unknown_tool(stack: Stack) -> None:
    with pytest.raises(ToolNotFoundError, match="no tool named 'ghost'"):
        stack.call("ghost")


def test_hidden_tool_is_unavailable_with_the_reason(stack: Stack) -> None:
    stack.tool("hidden", MARKER, variants=[{"match": {"os": "plan9"}}])
    with pytest.raises(ToolUnavailableError) as caught:
        stack.call("hidden")
    assert caught.value.status == "hidden"
    assert "plan9" in caught.value.reason
    assert not (stack.cwd / "ran").exists()


def test_broken_tool_is_unavailable_with_the_reason(stack: Stack) -> None:
    (stack.tools / "broken.meta").write_text('{\n  "tier": "lukewarm"\n}')
    exe = stack.tools / "broken"
    exe.write_text(MARKER)
    exe.chmod(0o755)
    with pytest.raises(ToolUnavailableError) as caught:
        stack.call("broken")
    assert caught.value.status == "broken"
    assert "broken.meta" in caught.value.reason
    assert "lukewarm" in caught.value.reason
    assert not (stack.cwd / "ran").exists()


def test_missing_cmd_is_a_clear_executable_error(stack: Stack) -> None:
    stack.tool("nowhere", cmd=str(stack.root / "no-such-binary"))
    with pytest.raises(ExecutableError, match=r"nowhere: .*no-such-binary does not exist"):
        stack.call("nowhere")


def test_non_executable_file_is_a_clear_executable_error(stack: Stack) -> None:
    exe = stack.tool("plain", "#!/bin/sh\necho hi\n")
    exe.chmod(0o644)
    with pytest.raises(ExecutableError, match=r"plain: .*no executable plain"):
        stack.call("plain")


def test_executable_removed_after_the_registry_loaded(stack: Stack) -> None:
    exe = stack.tool("fleeting", MARKER)
    dispatcher = stack.dispatcher()
    exe.unlink()
    with pytest.raises(ExecutableError, match=r"fleeting: .*fleeting is missing or not executable"):
        dispatcher.call("fleeting", {}, stack.options())


def test_executable_bit_dropped_after_the_registry_loaded(stack: Stack) -> None:
    exe = stack.tool("fleeting", MARKER)
    dispatcher = stack.dispatcher()
    exe.chmod(0o644)
    with pytest.raises(ExecutableError, match="missing or not executable"):
        dispatcher.call("fleeting", {}, stack.options())
    assert not (stack.cwd / "ran").exists()


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("filesystem: [unclosed\n", "invalid YAML: line 2, column 1"),
        ("filesystem:\n  rw: /not/a/list\n", "filesystem.rw: expected a list of strings"),
        ("network:\n  connect_tcp: [99999]\n", "network.connect_tcp"),
        ("env: [NOT-A-NAME]\n", "env"),
    ],
)
def test_bad_profile_is_an_error_and_the_tool_never_runs(
    stack: Stack, text: str, words: str
) -> None:
    path = stack.write_profile("bad", text)
    stack.tool("victim", MARKER)
    with pytest.raises(ProfileError) as caught:
        stack.call("victim", profile="bad")
    assert caught.value.path == str(path)
    assert words in str(caught.value)
    assert not (stack.cwd / "ran").exists()


def test_missing_or_invalid_profile_name(stack: Stack) -> None:
    stack.tool("victim", MARKER)
    with pytest.raises(ProfileError, match="not found"):
        stack.call("victim", profile="nope")
    with pytest.raises(ProfileError, match="invalid profile name"):
        stack.call("victim", profile="../default")
    assert not (stack.cwd / "ran").exists()


# --- elevation ---------------------------------------------------------------


@pytest.mark.parametrize("meta", [{"elevated": True}, {"sudo": True}])
def test_elevated_and_sudo_tools_are_refused_by_default(stack: Stack, meta: dict[str, Any]) -> None:
    stack.tool("needy", MARKER, **meta)
    with pytest.raises(ElevationDeniedError, match="elevation denied"):
        stack.call("needy")
    assert not (stack.cwd / "ran").exists()


def test_asking_for_elevation_per_call_is_refused_by_default(stack: Stack) -> None:
    stack.tool("plain", MARKER)
    with pytest.raises(ElevationDeniedError):
        stack.call("plain", elevated=True)
    assert not (stack.cwd / "ran").exists()


def test_denied_sudo_request_describes_the_two_gates_chain(stack: Stack) -> None:
    exe = stack.tool("rooty", MARKER, sudo=True)
    gate = FakeGate(approve=False)
    dispatcher = stack.dispatcher(gate=gate)
    with pytest.raises(ElevationDeniedError, match="fake gate says no"):
        dispatcher.call("rooty", {"x": 1}, stack.options())
    (request,) = gate.requests
    assert request.kind is Kind.SUDO
    assert request.argv == ("sudo", "-A", "--", str(exe))
    assert request.args == {"x": 1}
    assert request.cwd == str(stack.cwd)
    assert gate.reports == []
    assert not (stack.cwd / "ran").exists()


def test_approved_elevation_runs_outside_the_sandbox(stack: Stack) -> None:
    script = '#!/bin/sh\ncat >/dev/null\necho escaped > "$HOME/note.txt"\necho "$DISPLAY"\n'
    exe = stack.tool("escape", script, elevated=True)
    gate = FakeGate(approve=True)
    result = stack.dispatcher(gate=gate).call("escape", {"text": "hi"}, stack.options())
    assert result.ok, result.error
    assert (result.sandboxed, result.elevated, result.sudo) == (False, True, False)
    assert result.stdout == ":42\n"  # outside the sandbox the caller's environment passes
    assert (stack.home / "note.txt").read_text() == "escaped\n"
    (request,) = gate.requests
    assert request.kind is Kind.SANDBOX
    assert request.argv == (str(exe),)
    assert request.args == {"text": "hi"}


def test_sandboxed_result_flags(stack: Stack) -> None:
    stack.tool("echo", ECHO)
    result = stack.call("echo", {"a": 1})
    assert result.sandboxed is HAS_LANDLOCK
    assert (result.elevated, result.sudo) == (False, False)
    assert result.argv == (str(stack.tools / "echo"),)
    assert result.duration > 0
    doc = result.to_json()
    assert doc["exit_code"] == 0
    assert doc["content"] == result.content
    assert doc["sandboxed"] is HAS_LANDLOCK


# --- cached profiles and rules -------------------------------------------------


def test_an_edited_profile_applies_to_the_next_call(stack: Stack) -> None:
    stack.tool("envdump", ENV_DUMP)
    dispatcher = stack.dispatcher()
    first = stack.default_profile_with(env=["PATH", "LANG"])
    stack.write_profile("custom", first)
    for _ in range(2):  # the second call takes the cached path
        env = json.loads(dispatcher.call("envdump", {}, stack.options(profile="custom")).stdout)
        assert "HOME" not in env["env"]
    # Same length, same second: only the bytes differ.
    path = stack.write_profile("custom", stack.default_profile_with(env=["PATH", "HOME"]))
    assert len(path.read_text()) == len(yaml.safe_dump(first))
    env = json.loads(dispatcher.call("envdump", {}, stack.options(profile="custom")).stdout)
    assert env["env"]["HOME"] == str(stack.home)
    assert "LANG" not in env["env"]


def test_a_profile_broken_after_caching_is_an_error(stack: Stack) -> None:
    stack.tool("victim", MARKER)
    dispatcher = stack.dispatcher()
    stack.write_profile("custom", stack.default_profile_with())
    for _ in range(2):
        assert dispatcher.call("victim", {}, stack.options(profile="custom")).ok
    (stack.cwd / "ran").unlink()
    stack.write_profile("custom", "network: {enabled: maybe}\n")
    with pytest.raises(ProfileError, match=r"network\.enabled"):
        dispatcher.call("victim", {}, stack.options(profile="custom"))
    stack.profile_path("custom").write_bytes(b"\xff\xfe not utf-8")
    with pytest.raises(ProfileError, match="not UTF-8"):
        dispatcher.call("victim", {}, stack.options(profile="custom"))
    stack.profile_path("custom").unlink()
    with pytest.raises(ProfileError, match="not found"):
        dispatcher.call("victim", {}, stack.options(profile="custom"))
    assert not (stack.cwd / "ran").exists()


def test_a_deleted_default_profile_is_installed_again(stack: Stack) -> None:
    stack.tool("echo", ECHO)
    dispatcher = stack.dispatcher()
    assert dispatcher.call("echo", {}, stack.options()).ok
    stack.profile_path("default").unlink()
    assert dispatcher.call("echo", {}, stack.options()).ok
    assert stack.profile_path("default").is_file()


def test_rules_cache_reuses_parses_and_rules_for_the_same_inputs(stack: Stack) -> None:
    cache = RulesCache()
    stack.write_profile("p", stack.default_profile_with())
    first = cache.profile(stack.env, "p")
    second = cache.profile(stack.env, "p")
    assert second is cache.profile(stack.env, "p")
    assert second == first
    rules = cache.rules(second, stack.env, "/a")
    assert cache.rules(second, dict(stack.env), "/a") is rules
    assert cache.rules(second, stack.env, "/b") is not rules
    assert cache.rules(second, {**stack.env, "TMPDIR": "/elsewhere"}, "/a") != rules
    ldd = stack.default_profile_with(advanced={"ldd": True, "add_exec": []})
    stack.write_profile("ldd", ldd)
    with_ldd = cache.profile(stack.env, "ldd")
    with_ldd = cache.profile(stack.env, "ldd")
    # advanced.ldd inspects files: never memoized.
    assert cache.rules(with_ldd, stack.env, "/a") is not cache.rules(with_ldd, stack.env, "/a")


def test_rules_cache_is_bounded(stack: Stack) -> None:
    cache = RulesCache(max_entries=2)
    stack.write_profile("p", stack.default_profile_with())
    profile = cache.profile(stack.env, "p")
    profile = cache.profile(stack.env, "p")
    first = cache.rules(profile, stack.env, "/1")
    cache.rules(profile, stack.env, "/2")
    cache.rules(profile, stack.env, "/3")
    assert cache.rules(profile, stack.env, "/1") is not first
