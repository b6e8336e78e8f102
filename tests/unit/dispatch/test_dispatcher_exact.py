"""The dispatcher pinned exactly: every refusal word for word, both sandbox paths.

Runs the real :class:`Dispatcher` on small tools in an isolated environment
(see dispatch_helpers.py): the Landlock-only path (the ``find_bwrap`` hook
answering ``None``) and the namespace path with a real and a failing
``bwrap``, and the rules cache on real profile files.  Argument checks are in
test_validate_args_exact.py, elevated and sudo calls in
test_dispatcher_elevated_exact.py.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
from pathlib import Path
from typing import Any

import pytest
from dispatch_helpers import ECHO, ENV_DUMP, MARKER, Stack

from registry_core import paths
from registry_core.dispatch import CallOptions, Dispatcher, RefusingGate
from registry_core.dispatch.dispatcher import RulesCache, sandbox_path
from registry_core.errors import (
    BrokerSocketExposedError,
    ExecutableError,
    NamespacesUnavailableError,
    ProfileError,
    SandboxError,
    UnsafeWorkingDirectoryError,
)
from registry_core.registry import Registry
from registry_core.registry.model import Status, Tool
from registry_core.sandbox import Access, EffectiveRules, NetworkPolicy, PathRule, SandboxCache
from registry_core.sandbox.contain import find_bwrap
from registry_core.sandbox.profiles import MAX_PROFILE_BYTES, NetworkMode

NO_NAMESPACES = (
    "namespaces: bwrap (bubblewrap) is not installed in a system directory Ollie trusts: "
    "the session D-Bus, X11, ssh-agent, tmux and every other socket in /tmp and /run/user "
    "stay reachable, the real /tmp is shared, and processes may outlive the call"
)

# --- sandbox_path ------------------------------------------------------------------------


def _rules(*rules: tuple[str, Access], best_effort: bool = False) -> EffectiveRules:
    return EffectiveRules(
        profile="p",
        source="/p.yaml",
        paths=tuple(PathRule(path, access, "t") for path, access in rules),
        network=NetworkPolicy(NetworkMode.UNRESTRICTED),
        env=(),
        best_effort=best_effort,
    )


def test_sandbox_path_under_an_executable_root_rule() -> None:
    rules = _rules(("/", Access.ROX))
    assert sandbox_path(rules, "/usr/bin:/home/u/bin:/") == "/usr/bin:/home/u/bin:/"


def test_sandbox_path_root_names_ending_in_x_or_a_slash() -> None:
    rules = _rules(("/opt/BoX", Access.ROX), ("/srv/tools/", Access.RWX))
    path = "/opt/BoX/bin:/opt/Bo/bin:/srv/tools/bin:/srv/toolsX:/opt/BoX"
    assert sandbox_path(rules, path) == "/opt/BoX/bin:/srv/tools/bin:/opt/BoX"


# --- the rules cache on real profile files ------------------------------------------------


def test_a_profile_is_parsed_once_while_its_bytes_stay_the_same(stack: Stack) -> None:
    cache = RulesCache()
    path = stack.write_profile("p", stack.default_profile_with())
    first = cache.profile(stack.env, "p")  # through load_profile: now a known path
    second = cache.profile(stack.env, "p")  # parsed from the bytes and kept
    assert cache.profile(stack.env, "p") is second
    assert cache.profile(stack.env, "p") is second
    assert (second.name, second.source) == ("p", str(path))
    assert second == first


def test_a_profile_of_exactly_the_limit_is_kept(stack: Stack) -> None:
    cache = RulesCache()
    path = stack.write_profile("big", stack.default_profile_with())
    text = path.read_text()
    path.write_text(text + "#" * (MAX_PROFILE_BYTES - len(text) - 1) + "\n")
    assert path.stat().st_size == MAX_PROFILE_BYTES
    cache.profile(stack.env, "big")
    kept = cache.profile(stack.env, "big")
    assert cache.profile(stack.env, "big") is kept


def test_a_profile_grown_past_the_limit_after_caching_is_refused(stack: Stack) -> None:
    cache = RulesCache()
    path = stack.write_profile("big", stack.default_profile_with())
    cache.profile(stack.env, "big")
    cache.profile(stack.env, "big")
    path.write_bytes(b"#" * (MAX_PROFILE_BYTES + 1))
    with pytest.raises(ProfileError) as caught:
        cache.profile(stack.env, "big")
    assert str(caught.value) == f"{path}: larger than {MAX_PROFILE_BYTES} bytes"
    path.write_bytes(b"#" * (3 * MAX_PROFILE_BYTES))
    with pytest.raises(ProfileError) as caught:
        cache.profile(stack.env, "big")
    assert str(caught.value) == f"{path}: larger than {MAX_PROFILE_BYTES} bytes"


def test_a_symlinked_profile_is_cached_too(stack: Stack) -> None:
    cache = RulesCache()
    real = stack.root / "dotfiles" / "linked.yaml"
    real.parent.mkdir()
    real.write_text(stack.write_profile("tmpl", stack.default_profile_with()).read_text())
    stack.profile_path("linked").symlink_to(real)
    cache.profile(stack.env, "linked")
    kept = cache.profile(stack.env, "linked")
    assert cache.profile(stack.env, "linked") is kept
    assert (kept.name, kept.source) == ("linked", str(stack.profile_path("linked")))


def test_profiles_are_told_apart_by_name_and_by_file(stack: Stack) -> None:
    cache = RulesCache()
    text = stack.write_profile("p", stack.default_profile_with()).read_text()
    stack.write_profile("q", text)
    for _ in range(2):
        assert cache.profile(stack.env, "p").name == "p"
        assert cache.profile(stack.env, "q").name == "q"
    # The same name and the same bytes in another configuration directory.
    other = {**stack.env, "XDG_CONFIG_HOME": str(stack.root / "other-config")}
    other_path = paths.sandbox_profile_path(other, "p")
    other_path.parent.mkdir(parents=True)
    other_path.write_text(text)
    for _ in range(2):
        assert cache.profile(other, "p").source == str(other_path)
        assert cache.profile(stack.env, "p").source == str(stack.profile_path("p"))


def test_a_name_load_profile_refuses_is_refused_even_when_the_file_exists(stack: Stack) -> None:
    cache = RulesCache()
    stack.write_profile("p", "{}\n")  # the profiles' directory exists: "../" leads out of it
    beside = stack.root / "config" / "ollie" / "default.yaml"
    beside.write_text("{}\n")
    for _ in range(2):
        with pytest.raises(ProfileError) as caught:
            cache.profile(stack.env, "../default")
        assert str(caught.value) == (
            "../default: invalid profile name (allowed: A-Z a-z 0-9 _ . -)"
        )


def test_the_rules_cache_forgets_the_least_recently_used(stack: Stack) -> None:
    cache = RulesCache(max_entries=2)
    profile = cache.profile(stack.env, "default")
    one = cache.rules(profile, stack.env, "/1")
    two = cache.rules(profile, stack.env, "/2")
    assert cache.rules(profile, stack.env, "/1") is one  # /1 is now the most recent
    assert cache.rules(profile, stack.env, "/2") is two
    assert cache.rules(profile, stack.env, "/1") is one
    cache.rules(profile, stack.env, "/3")  # /2 goes
    assert cache.rules(profile, stack.env, "/1") is one
    assert cache.rules(profile, stack.env, "/2") is not two


def test_the_profile_cache_forgets_the_least_recently_used(stack: Stack) -> None:
    cache = RulesCache(max_entries=2)
    for name in ("a", "b", "c"):
        stack.write_profile(name, stack.default_profile_with())
        cache.profile(stack.env, name)  # known now
    a = cache.profile(stack.env, "a")
    b = cache.profile(stack.env, "b")
    assert cache.profile(stack.env, "a") is a
    cache.profile(stack.env, "c")  # b goes
    assert cache.profile(stack.env, "a") is a
    assert cache.profile(stack.env, "b") is not b


def test_the_rules_cache_holds_32_entries_by_default(stack: Stack) -> None:
    cache = RulesCache()
    profile = cache.profile(stack.env, "default")
    kept = [cache.rules(profile, stack.env, f"/{i}") for i in range(32)]
    assert all(cache.rules(profile, stack.env, f"/{i}") is kept[i] for i in range(32))
    cache.rules(profile, stack.env, "/32")  # /0 goes
    assert all(cache.rules(profile, stack.env, f"/{i}") is kept[i] for i in range(1, 32))
    assert cache.rules(profile, stack.env, "/0") is not kept[0]


# --- the dispatcher's parts ----------------------------------------------------------------


def test_bwrap_is_looked_up_once_with_the_dispatchers_environment(stack: Stack) -> None:
    asked: list[dict[str, str]] = []

    def find(env: Any) -> str:
        asked.append(dict(env))
        return "/opt/bwrap"

    dispatcher = Dispatcher(registry=stack.registry, env=stack.env, find_bwrap=find)
    assert dispatcher.bwrap() == "/opt/bwrap"
    assert dispatcher.bwrap() == "/opt/bwrap"
    assert asked == [stack.env]


def test_a_dispatcher_given_no_environment_works_on_a_copy_of_this_processs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OLLIE_TOOLS_PATH", "/from/this/process")
    dispatcher = Dispatcher(registry=Registry)
    monkeypatch.setenv("OLLIE_TOOLS_PATH", "/changed/later")
    assert dispatcher.env["OLLIE_TOOLS_PATH"] == "/from/this/process"
    assert dispatcher.tool_env(Registry())["OLLIE_TOOLS_PATH"] == "/from/this/process"
    assert isinstance(dispatcher.gate, RefusingGate)
    assert dispatcher.askpass is None


def test_a_registry_without_directories_passes_the_configured_tools_path(stack: Stack) -> None:
    env = {**stack.env, "OLLIE_TOOLS_PATH": "/a/tools:/b/tools"}
    dispatcher = Dispatcher(registry=Registry, env=env)
    assert dispatcher.tool_env(Registry()) == {
        "OLLIE_TOOLS_PATH": "/a/tools:/b/tools",
        "OLLIE_ELEVATE_SOCKET": str(stack.root / "runtime" / "ollie" / "elevate.sock"),
    }


def test_a_tool_without_an_executable_or_a_reason(stack: Stack) -> None:
    tool = Tool("ghostly", str(stack.tools / "ghostly.meta"), Status.AVAILABLE)
    registry = Registry(tools={"ghostly": tool})
    dispatcher = Dispatcher(registry=lambda: registry, env=stack.env)
    with pytest.raises(ExecutableError) as caught:
        dispatcher.call("ghostly", {}, stack.options())
    assert str(caught.value) == "ghostly: no executable found"


def test_a_missing_executable_is_named_word_for_word(stack: Stack) -> None:
    exe = stack.tool("fleeting", MARKER)
    dispatcher = stack.dispatcher()
    exe.unlink()
    with pytest.raises(ExecutableError) as caught:
        dispatcher.call("fleeting", {}, stack.options())
    assert str(caught.value) == f"fleeting: {exe} is missing or not executable"


@pytest.mark.parametrize("where", ["tools", "home"])
def test_a_sandboxed_call_refuses_an_unsafe_working_directory(stack: Stack, where: str) -> None:
    stack.tool("victim", MARKER)
    cwd = stack.tools if where == "tools" else stack.home
    with pytest.raises(UnsafeWorkingDirectoryError) as caught:
        stack.dispatcher().call("victim", {}, CallOptions(cwd=str(cwd)))
    assert caught.value.cwd == str(cwd)
    assert not (cwd / "ran").exists()


# --- Landlock only: no bwrap ------------------------------------------------------------------


def _landlock_only(stack: Stack, gate: Any = None, *, bwrap: bool = False) -> Dispatcher:
    """A dispatcher over the stack's tools that finds no bwrap (unless ``bwrap``)."""
    registry = stack.registry()
    find = find_bwrap if bwrap else (lambda env: None)
    return Dispatcher(registry=lambda: registry, env=stack.env, gate=gate, find_bwrap=find)


def _best_effort(stack: Stack, name: str = "be", **changes: Any) -> None:
    data = stack.default_profile_with(**changes)
    data["general"]["best_effort"] = True
    stack.write_profile(name, data)


def test_without_bwrap_a_strict_profile_is_refused_word_for_word(stack: Stack) -> None:
    stack.tool("victim", MARKER)
    stack.write_profile("strict", stack.default_profile_with())
    with pytest.raises(NamespacesUnavailableError) as caught:
        _landlock_only(stack).call("victim", {}, stack.options(profile="strict"))
    assert str(caught.value) == (
        "sandboxed tools run in namespaces built by bwrap, which is not installed in a "
        "system directory Ollie trusts (/usr/bin, /bin, /usr/sbin, /sbin, /usr/local/bin; "
        "the file and its directories root's, writable by root alone): "
        "install the 'bubblewrap' package (apt/dnf install bubblewrap); or set "
        f"'general.best_effort: true' in {stack.profile_path('strict')} to run with "
        "Landlock only"
    )
    assert not (stack.cwd / "ran").exists()


def test_without_bwrap_best_effort_runs_under_landlock(stack: Stack) -> None:
    _best_effort(stack)
    outside = stack.root / "outside"
    outside.mkdir()
    script = (
        "#!/usr/bin/python3\nimport json, os, sys\n"
        "args = json.load(sys.stdin)\n"
        "def attempt(path):\n"
        "    try:\n"
        "        with open(path, 'w') as f:\n"
        "            f.write('x')\n"
        "        return 'written'\n"
        "    except OSError as e:\n"
        "        return e.strerror\n"
        "print(json.dumps({'args': args, 'env': dict(os.environ), 'cwd': os.getcwd(),\n"
        "    'outside': attempt(args['outside']),\n"
        "    'tmpdir': attempt(os.path.join(os.environ['TMPDIR'], 'note'))}))\n"
    )
    exe = stack.tool("probe", script)
    started: list[int] = []
    args = {"outside": str(outside / "escape")}
    result = _landlock_only(stack).call(
        "probe", args, stack.options(profile="be", on_start=started.append)
    )
    assert result.ok, result.error
    seen = json.loads(result.stdout)
    assert seen["args"] == args
    assert seen["outside"] == "Permission denied"
    assert not (outside / "escape").exists()
    assert seen["tmpdir"] == "written"
    assert (stack.root / "tmp" / "note").read_text() == "x"  # no private /tmp without bwrap
    assert seen["env"]["TMPDIR"] == str(stack.root / "tmp")
    assert seen["env"]["PATH"] == "/usr/local/bin:/usr/bin:/bin"
    assert seen["env"]["PWD"] == str(stack.cwd)
    assert seen["env"]["OLLIE_TOOLS_PATH"] == str(stack.tools)
    assert os.path.realpath(seen["cwd"]) == os.path.realpath(stack.cwd)
    assert result.sandboxed is True
    assert (result.elevated, result.sudo) == (False, False)
    assert result.argv == (str(exe),)
    assert len(started) == 1 and started[0] > 0
    assert result.unenforced[0] == NO_NAMESPACES
    assert (
        "udp: UDP and other non-TCP sockets are not restricted by Landlock"
        in (result.unenforced[1:])
    )


def test_without_bwrap_the_shared_tmp_holding_the_broker_socket_is_refused(
    stack: Stack,
) -> None:
    socket = f"/tmp/ollie-test-{secrets.token_hex(4)}/elevate.sock"
    stack.env["OLLIE_ELEVATE_SOCKET"] = socket
    data = stack.default_profile_with()
    data["general"]["best_effort"] = True
    data["filesystem"]["rw"] = ["{CWD}", "/tmp"]
    stack.write_profile("shared", data)
    stack.tool("victim", MARKER)
    with pytest.raises(BrokerSocketExposedError) as caught:
        _landlock_only(stack).call("victim", {}, stack.options(profile="shared"))
    assert (caught.value.rule_path, caught.value.socket) == ("/tmp", socket)
    assert not (stack.cwd / "ran").exists()


# --- bwrap: the namespace sandbox ---------------------------------------------------------


def test_the_tool_gets_a_private_tmp_under_the_sandbox_base(stack: Stack) -> None:
    left = f"ollie-left-{secrets.token_hex(4)}"
    host_tmp = stack.root / "tmp"  # the caller's TMPDIR: not the tool's, not even visible
    script = (
        "#!/usr/bin/python3\nimport json, os, sys\nsys.stdin.read()\n"
        f"open('/tmp/{left}', 'w').write('x')\n"
        f"print(json.dumps({{'env': dict(os.environ), 'host_tmp': os.path.exists('{host_tmp}'),"
        f" 'own': open('/tmp/{left}').read()}}))\n"
    )
    stack.tool("envdump", script)
    base = paths.sandbox_tmp_base(stack.env)
    during: list[list[str]] = []

    def on_start(pid: int) -> None:
        during.append(sorted(p.name[:5] for p in base.iterdir()))

    result = stack.call("envdump", on_start=on_start)
    assert result.ok, result.error
    seen = json.loads(result.stdout)
    assert seen["env"]["TMPDIR"] == "/tmp"
    assert (seen["host_tmp"], seen["own"]) == (False, "x")
    assert list(host_tmp.iterdir()) == []
    assert during == [["call-"]]
    assert list(base.iterdir()) == []
    assert not (Path("/tmp") / left).exists()
    assert result.sandboxed is True
    assert "namespaces" not in " ".join(result.unenforced)


def test_a_broker_socket_in_the_hosts_tmp_is_not_exposed_by_the_private_tmp(
    stack: Stack,
) -> None:
    socket = f"/tmp/ollie-test-{secrets.token_hex(4)}/elevate.sock"
    stack.env["OLLIE_ELEVATE_SOCKET"] = socket
    stack.tool("envdump", ENV_DUMP)
    result = stack.call("envdump")
    assert result.ok, result.error
    assert json.loads(result.stdout)["env"]["OLLIE_ELEVATE_SOCKET"] == socket


def test_a_bwrap_that_fails_is_a_sandbox_error_in_its_own_words(stack: Stack) -> None:
    fake = stack.root / "bin" / "bwrap"
    fake.write_text("#!/bin/sh\necho 'bwrap: setting up uid map: Permission denied' >&2\nexit 1\n")
    fake.chmod(0o755)
    stack.tool("victim", MARKER)
    registry = stack.registry()
    dispatcher = Dispatcher(
        registry=lambda: registry, env=stack.env, find_bwrap=lambda env: str(fake)
    )
    with pytest.raises(SandboxError) as caught:
        dispatcher.call("victim", {}, stack.options())
    assert str(caught.value) == (
        "the sandbox could not be set up (bwrap): bwrap: setting up uid map: Permission denied"
    )
    assert not (stack.cwd / "ran").exists()
    assert list(paths.sandbox_tmp_base(stack.env).iterdir()) == []


# --- _finish -----------------------------------------------------------------------------


@pytest.mark.parametrize("line", ["echo partial >&2", "printf partial >&2"])
def test_a_timeout_is_the_line_below_the_tools_own_stderr(stack: Stack, line: str) -> None:
    # With or without a final newline of its own: no blank line in between.
    stack.tool("slow", f"#!/bin/sh\n{line}\nexec sleep 60\n")
    result = stack.call("slow", timeout=0.5)
    assert result.stderr == "partial\ntimed out after 0.5 s"
    assert (result.exit_code, result.timed_out) == (124, True)


def test_a_timeout_without_stderr_is_the_only_line(stack: Stack) -> None:
    stack.tool("slow", "#!/bin/sh\nexec sleep 60\n")
    result = stack.call("slow", timeout=0.5)
    assert result.stderr == "timed out after 0.5 s"


def test_truncated_stdout_alone_marks_the_result_truncated(stack: Stack) -> None:
    stack.tool("loud", "#!/bin/sh\ncat >/dev/null\nprintf '%020d' 0\necho fine >&2\n")
    result = stack.call("loud", limit=10)
    assert result.truncated is True
    assert result.stdout == "0" * 10 + "\n[output truncated: 10 bytes over the 10 bytes limit]"
    assert result.stderr == "fine\n"


def test_truncated_stderr_alone_marks_the_result_truncated(stack: Stack) -> None:
    stack.tool("loud", "#!/bin/sh\ncat >/dev/null\necho ok\nprintf '%020d' 0 >&2\n")
    result = stack.call("loud", limit=10)
    assert result.truncated is True
    assert result.stdout == "ok\n"
    assert result.stderr == "0" * 10 + "\n[output truncated: 10 bytes over the 10 bytes limit]"


# --- the tool's own executable, wherever cmd points ------------------------------------------


@pytest.mark.parametrize("bwrap", [True, False])
def test_an_executable_outside_every_rule_may_still_run(stack: Stack, bwrap: bool) -> None:
    # Only the rule the dispatcher adds for the tool's own executable lets it run:
    # no profile rule names this directory.
    elsewhere = stack.root / "elsewhere"
    elsewhere.mkdir()
    exe = elsewhere / "prog"
    exe.write_text(ECHO)
    exe.chmod(0o755)
    stack.tool("far", cmd=str(exe))
    _best_effort(stack)
    dispatcher = _landlock_only(stack, bwrap=bwrap)
    result = dispatcher.call("far", {"x": 1}, stack.options(profile="be"))
    assert result.ok, result.error
    assert json.loads(result.stdout) == {"x": 1}
    assert result.argv == (str(exe),)


# --- a kernel without Landlock (the dispatcher's sandbox cache at ABI 0) ----------------------


@pytest.mark.parametrize("bwrap", [True, False])
def test_without_landlock_a_best_effort_call_says_it_is_not_sandboxed(
    stack: Stack, bwrap: bool
) -> None:
    stack.tool("echo", ECHO)
    _best_effort(stack)
    dispatcher = _landlock_only(stack, bwrap=bwrap)
    dispatcher._cache = SandboxCache(abi=0)  # what the kernel offers, detected once per dispatcher
    result = dispatcher.call("echo", {"a": 1}, stack.options(profile="be"))
    assert result.ok, result.error
    assert result.sandboxed is False
    no_landlock = (
        "landlock: the kernel offers no Landlock: no filesystem, network or IPC restriction"
    )
    assert result.unenforced == ((no_landlock,) if bwrap else (NO_NAMESPACES, no_landlock))


# --- the broker socket inside the namespace sandbox --------------------------------------------


def test_the_broker_socket_is_reachable_from_the_sandbox(stack: Stack) -> None:
    path = stack.root / "runtime" / "ollie" / "elevate.sock"
    path.parent.mkdir(parents=True)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
        server.bind(str(path))
        server.listen(1)
        script = (
            "#!/usr/bin/python3\nimport os, socket, sys\nsys.stdin.read()\n"
            "s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)\n"
            "s.connect(os.environ['OLLIE_ELEVATE_SOCKET'])\ns.sendall(b'hello broker')\n"
            "s.close()\nprint('sent')\n"
        )
        stack.tool("caller", script)
        result = stack.call("caller")
        assert result.ok, result.error
        assert result.stdout == "sent\n"
        server.settimeout(10)
        peer, _ = server.accept()
        with peer:
            assert peer.recv(100) == b"hello broker"
