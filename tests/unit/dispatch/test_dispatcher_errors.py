"""The dispatcher's timeouts, output limits, errors, elevation and cached profiles.

Runs like test_dispatcher_contract.py: the real :class:`Dispatcher` on small
tools in an isolated environment (see dispatch_helpers.py).
"""

from __future__ import annotations

import json
import secrets
import time
from typing import Any

import pytest
import yaml
from dispatch_helpers import (
    ECHO,
    ENV_DUMP,
    HAS_LANDLOCK,
    MARKER,
    FakeGate,
    Stack,
    assert_no_process,
    pinned,
)

from registry_core.dispatch import CallOptions, Kind
from registry_core.dispatch.dispatcher import DEFAULT_TIMEOUT, RulesCache
from registry_core.dispatch.process import OUTPUT_LIMIT
from registry_core.errors import (
    ArgumentsError,
    ElevationDeniedError,
    ExecutableError,
    ProfileError,
    ToolChangedError,
    ToolNotFoundError,
    ToolUnavailableError,
)
from registry_core.trusted import find_trusted

# --- timeouts and output limits ----------------------------------------------


def test_timeout_kills_the_tool_and_its_children(stack: Stack) -> None:
    nonce = secrets.randbelow(10**9)
    script = (
        f"#!/bin/sh\nsleep 60.{nonce}1 &\nsetsid sleep 60.{nonce}2 &\n"
        f"echo started > started\nexec sleep 60.{nonce}3\n"
    )
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
    assert (stack.cwd / "started").exists()
    assert_no_process(f"60.{nonce}", "the tool, its child or its detached child")


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
        ("env: [=value]\n", "env"),
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
    assert request.argv == (find_trusted("sudo"), "-A", "--", *pinned(exe))
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
    assert result.stdout == ":42\n"  # outside the sandbox the caller's (cleaned) environment
    assert (stack.home / "note.txt").read_text() == "escaped\n"
    (request,) = gate.requests
    assert request.kind is Kind.SANDBOX
    assert request.argv == pinned(exe)
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
    ldd = stack.default_profile_with(advanced={"ldd": True, "add_exec": False})
    stack.write_profile("ldd", ldd)
    with_ldd = cache.profile(stack.env, "ldd")
    # advanced.ldd is applied per call to the command (with_command): the rest is memoized.
    assert cache.rules(with_ldd, stack.env, "/a") is cache.rules(with_ldd, stack.env, "/a")


def test_rules_cache_is_bounded(stack: Stack) -> None:
    cache = RulesCache(max_entries=2)
    stack.write_profile("p", stack.default_profile_with())
    profile = cache.profile(stack.env, "p")
    profile = cache.profile(stack.env, "p")
    first = cache.rules(profile, stack.env, "/1")
    cache.rules(profile, stack.env, "/2")
    cache.rules(profile, stack.env, "/3")
    assert cache.rules(profile, stack.env, "/1") is not first


# --- a snapshot older than its files -------------------------------------------


def test_a_tool_changed_after_the_snapshot_is_called_from_a_new_one(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    from registry_core.dispatch import Dispatcher
    from registry_core.registry import RegistryLoader, scan_cache

    monkeypatch.setattr(scan_cache, "SETTLE_NS", 0)
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}}
    stack.tool("echo", ECHO, args=schema)
    cache = stack.root / "cache"
    RegistryLoader([stack.tools], stack.env, cache_dir=cache).load()  # fills the scan cache
    stale = RegistryLoader([stack.tools], stack.env, cache_dir=cache).load()
    stack.tool("echo", args={**schema, "required": ["n"]})  # the file changes afterwards
    snapshots = iter([stale, RegistryLoader([stack.tools], stack.env).load()])
    dispatcher = Dispatcher(registry=lambda: next(snapshots), env=stack.env)

    with pytest.raises(ArgumentsError, match="n"):  # the new version's schema decided
        dispatcher.call("echo", {}, stack.options())
    with pytest.raises(ToolChangedError, match=r"echo\.meta changed since"):
        Dispatcher(registry=lambda: stale, env=stack.env).call("echo", {}, stack.options())
