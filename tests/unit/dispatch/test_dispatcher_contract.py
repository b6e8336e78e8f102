"""The dispatcher's contract (spec "Input/Output contract", "Environment Variables").

Every call goes through the real :class:`Dispatcher` with small tools written
into a temporary tools directory, in an isolated environment: ``HOME``,
``XDG_CONFIG_HOME``, ``XDG_RUNTIME_DIR`` and ``TMPDIR`` all live in
``tmp_path``, so the default sandbox profile is installed there on first use.
"""

from __future__ import annotations

import json
import os
from typing import Any

import pytest
from dispatch_helpers import ECHO, ENV_DUMP, HAS_LANDLOCK, MARKER, SHIPPED_PROFILE, Stack

from registry_core.dispatch import sandbox_path, validate_args
from registry_core.errors import ArgumentsError
from registry_core.sandbox import Access, EffectiveRules, NetworkPolicy, PathRule
from registry_core.sandbox.profiles import NetworkMode

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
