"""Tests of ``ollie-tools policy ...`` and ``ollie-tools audit``."""

from __future__ import annotations

import argparse
import io
import json
import os
import socket
import time
from pathlib import Path
from typing import Any

import pytest

from registry_core.broker.question import Remember
from registry_core.broker.record.audit import AuditLog, AuditRecord, AuditRequester
from registry_core.broker.remember.policies import Policy, PolicyStore, file_sha256
from registry_core.broker.wire.messages import DecidedBy, Decision, Kind
from registry_core.cli import policy_cmd, tools
from registry_core.paths import audit_file, policies_file

META: dict[str, Any] = {"description": "d", "args": {"type": "object"}}


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    tools_dir = tmp_path / "tools"
    tools_dir.mkdir()
    extras: list[tuple[str, dict[str, Any]]] = [
        ("greet", {}),
        ("rootly", {"sudo": True}),
        ("nowhere", {"variants": [{"match": {"os": "plan9"}}]}),
    ]
    for name, extra in extras:
        (tools_dir / f"{name}.meta").write_text(json.dumps({**META, **extra}))
        script = tools_dir / name
        script.write_text(f"#!/bin/sh\necho {name}\n")
        script.chmod(0o755)
    (tools_dir / "noexe.meta").write_text(json.dumps(META))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("OLLIE_TOOLS_PATH", str(tools_dir))
    monkeypatch.setenv("PATH", "/nonexistent")  # noexe must not be found on $PATH
    return dict(os.environ)


def _subcommands(parser: argparse.ArgumentParser) -> argparse._SubParsersAction[Any]:
    return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))


def wired() -> bool:
    """Whether ``ollie-tools`` itself registers these subcommands yet."""
    return "policy" in _subcommands(tools.build_parser()).choices


def run(
    argv: list[str], env: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> tuple[int, str, str]:
    """Run through ``tools.main`` once wired, else through a parser of our own."""
    out = io.StringIO()
    if wired():
        code = tools.main(argv, out=out)
    else:
        parser = argparse.ArgumentParser(prog="ollie-tools")
        policy_cmd.register(parser.add_subparsers(dest="command", required=True))
        args = parser.parse_args(argv)
        code = args.func(args, env, out)
    return code, out.getvalue(), capsys.readouterr().err


def listed(env: dict[str, str], capsys: pytest.CaptureFixture[str]) -> list[dict[str, Any]]:
    code, out, _ = run(["policy", "list", "--json"], env, capsys)
    assert code == 0
    result: list[dict[str, Any]] = json.loads(out)
    return result


def test_allow_binds_to_the_registry_executable(
    env: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    broker = PolicyStore(policies_file(env))  # a broker running meanwhile
    code, out, err = run(["policy", "allow", "greet"], env, capsys)
    assert (code, err) == (0, "")
    assert out.startswith("remembered: allow greet (sandbox)")
    exe = str(Path(env["OLLIE_TOOLS_PATH"]) / "greet")
    sha = file_sha256(exe)
    (entry,) = listed(env, capsys)
    assert entry["tool"] == "greet"
    assert entry["kind"] == "sandbox"
    assert entry["host"] == socket.gethostname()
    assert (entry["decision"], entry["remember"], entry["expires"]) == ("allow", "always", None)
    assert (entry["executable"], entry["sha256"]) == (exe, sha)
    hit = broker.lookup("greet", Kind.SANDBOX, socket.gethostname(), exe, sha)
    assert hit is not None
    assert hit.decision is Decision.ALLOW
    Path(exe).write_text("#!/bin/sh\necho changed\n")
    assert broker.lookup("greet", Kind.SANDBOX, socket.gethostname(), exe, file_sha256(exe)) is None


def test_allow_defaults_to_sudo_for_sudo_tools(
    env: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(["policy", "allow", "rootly"], env, capsys)[0] == 0
    assert run(["policy", "allow", "greet", "--kind", "sudo"], env, capsys)[0] == 0
    assert [(e["tool"], e["kind"]) for e in listed(env, capsys)] == [
        ("greet", "sudo"),
        ("rootly", "sudo"),
    ]


def test_allow_for_a_while_on_another_host(
    env: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, _ = run(["policy", "allow", "greet", "--for", "15m", "--host", "build"], env, capsys)
    assert code == 0
    code, out, _ = run(["policy", "list"], env, capsys)
    header, row = out.splitlines()
    assert header.split() == ["TOOL", "KIND", "HOST", "DECISION", "EXPIRES", "EXECUTABLE"]
    assert row.split()[:7] == ["greet", "sandbox", "build", "allow", "in", "14", "min"]
    assert header.index("EXECUTABLE") == row.index(env["OLLIE_TOOLS_PATH"])
    (entry,) = listed(env, capsys)
    assert entry["remember"] == "15m"
    assert entry["expires"] is not None


@pytest.mark.parametrize(
    ("tool", "message"),
    [
        ("missing", "no tool named 'missing'"),
        ("nowhere", "is hidden"),
        ("noexe", "has no executable"),
    ],
)
def test_allow_needs_a_usable_tool(
    env: dict[str, str], capsys: pytest.CaptureFixture[str], tool: str, message: str
) -> None:
    code, out, err = run(["policy", "allow", tool], env, capsys)
    assert (code, out) == (1, "")
    assert err.startswith("ollie-tools policy allow: ")
    assert message in err
    assert listed(env, capsys) == []


def test_usage_errors_exit_2(env: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (
        ["policy", "allow", "greet", "--for", "session"],
        ["policy", "allow", "greet", "--kind", "root"],
        ["policy"],
        ["audit", "--tail", "0"],
        ["audit", "--tail", "x"],
    ):
        with pytest.raises(SystemExit) as exc:
            run(argv, env, capsys)
        assert exc.value.code == 2
    for argv in (["policy", "revoke"], ["policy", "revoke", "greet", "--all"]):
        code, _, err = run(argv, env, capsys)
        assert code == 2
        assert "either TOOL" in err


@pytest.mark.parametrize("verb", ["allow", "deny"])
def test_a_rule_for_an_unknown_tool_is_refused_the_same_way(
    env: dict[str, str], capsys: pytest.CaptureFixture[str], verb: str
) -> None:
    code, out, err = run(["policy", verb, "unknown-tool"], env, capsys)
    assert (code, out) == (1, "")
    assert err == (
        f"ollie-tools policy {verb}: no tool named 'unknown-tool' in {env['OLLIE_TOOLS_PATH']}"
        " (add --force to remember a rule for it anyway)\n"
    )
    assert listed(env, capsys) == []


def test_forced_deny_of_an_unknown_tool_says_it_is_unknown_and_covers_both_kinds(
    env: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(["policy", "deny", "unknown-tool", "--force"], env, capsys)
    assert code == 0
    assert out.count("remembered: deny unknown-tool") == 2
    assert "warning: no tool named 'unknown-tool'" in err
    assert "unknown tool" in err
    run(["policy", "deny", "greet", "--kind", "sudo", "--host", "h"], env, capsys)
    got = [(e["tool"], e["kind"], e["decision"], e["remember"]) for e in listed(env, capsys)]
    assert got == [
        ("greet", "sudo", "deny", "deny_always"),
        ("unknown-tool", "sandbox", "deny", "deny_always"),
        ("unknown-tool", "sudo", "deny", "deny_always"),
    ]
    store = PolicyStore(policies_file(env))
    assert store.lookup("unknown-tool", "sudo", socket.gethostname(), None, None) is not None
    _, text, _ = run(["policy", "list"], env, capsys)
    assert "any executable" in text
    assert "never" in text


def test_forced_allow_of_an_unknown_tool_still_needs_an_executable(
    env: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(["policy", "allow", "unknown-tool", "--force"], env, capsys)
    assert code == 1
    assert "warning: no tool named 'unknown-tool'" in err
    assert "bound to the tool's executable" in err
    assert listed(env, capsys) == []


def test_deny_of_a_hidden_tool_needs_no_force(
    env: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(["policy", "deny", "nowhere"], env, capsys)
    assert (code, err) == (0, "")


def test_deny_rejects_bad_names(env: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(["policy", "deny", "../evil"], env, capsys)
    assert code == 1
    assert "tool name" in err


def test_revoke(env: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    run(["policy", "allow", "greet"], env, capsys)
    run(["policy", "deny", "greet", "--host", "other"], env, capsys)
    code, out, _ = run(["policy", "revoke", "greet", "--kind", "sudo", "--host", "x"], env, capsys)
    assert code == 1
    code, out, _ = run(["policy", "revoke", "greet", "--host", "other"], env, capsys)
    assert (code, out) == (0, "revoked 2 policies\n")
    code, out, _ = run(["policy", "revoke", "greet"], env, capsys)
    assert (code, out) == (0, "revoked 1 policy\n")
    code, out, err = run(["policy", "revoke", "greet"], env, capsys)
    assert (code, out) == (1, "")
    assert "no remembered policy for greet" in err


def test_revoke_all(env: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    run(["policy", "deny", "greet"], env, capsys)
    assert run(["policy", "revoke", "--all"], env, capsys)[:2] == (0, "revoked 2 policies\n")
    code, _, err = run(["policy", "revoke", "--all"], env, capsys)
    assert code == 1
    assert "no remembered policies" in err


def test_list_empty_and_corrupt(env: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["policy", "list"], env, capsys) == (0, "no remembered policies\n", "")
    path = policies_file(env)
    path.parent.mkdir(parents=True)
    path.write_text("policies: [")
    code, out, err = run(["policy", "list"], env, capsys)
    assert (code, out) == (0, "no remembered policies\n")
    assert err.startswith("ollie-tools: warning: ")
    assert err.count("moved aside") == 1


def test_expires_text() -> None:
    def policy(remember: Remember, expires: float | None) -> Policy:
        return Policy("t", Kind.SANDBOX, "h", Decision.ALLOW, remember, 0.0, expires, "/x", "a")

    now = 1000.0
    assert policy_cmd.expires_text(policy(Remember.ALWAYS, None), now) == "never"
    assert policy_cmd.expires_text(policy(Remember.SESSION, None), now) == "session"
    assert policy_cmd.expires_text(policy(Remember.HOUR, now), now) == "expired"
    assert policy_cmd.expires_text(policy(Remember.HOUR, now + 0.5), now) == "in 1 s"
    assert policy_cmd.expires_text(policy(Remember.HOUR, now + 45), now) == "in 45 s"
    assert policy_cmd.expires_text(policy(Remember.MINUTES_15, now + 899), now) == "in 14 min"
    assert policy_cmd.expires_text(policy(Remember.HOUR, now + 3600), now) == "in 1 h"
    assert policy_cmd.expires_text(policy(Remember.HOUR, now + 7500), now) == "in 2 h 5 min"
    assert policy_cmd.expires_text(policy(Remember.HOUR, now + 3 * 86400), now) == "in 3 days"


# --- audit ----------------------------------------------------------------------------------


def add_records(env: dict[str, str], count: int) -> list[AuditRecord]:
    log = AuditLog(audit_file(env))
    records = [
        AuditRecord(
            time=time.time() - 100 + i,
            request_id=i,
            tool=f"tool{i}",
            kind=Kind.SUDO,
            host="laptop",
            requester=AuditRequester(pid=100 + i, exe="/usr/bin/agent"),
            decision=Decision.DENY if i % 2 else Decision.ALLOW,
            by=DecidedBy.TIMEOUT if i % 2 else DecidedBy.USER,
        )
        for i in range(count)
    ]
    for r in records:
        log.append(r)
    return records


def test_audit_empty(env: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["audit"], env, capsys) == (0, "no audit records\n", "")


def test_audit_table_tails_20_newest_last(
    env: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    add_records(env, 25)
    code, out, err = run(["audit"], env, capsys)
    assert (code, err) == (0, "")
    header, *rows = out.splitlines()
    assert header.split() == ["TIME", "TOOL", "KIND", "HOST", "DECISION", "BY", "REQUESTER"]
    assert len(rows) == 20
    assert rows[0].split()[2:] == [
        "tool5",
        "sudo",
        "laptop",
        "deny",
        "timeout",
        "105",
        "/usr/bin/agent",
    ]
    assert rows[-1].split()[2:7] == ["tool24", "sudo", "laptop", "allow", "user"]


def test_audit_json_tail(env: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    records = add_records(env, 5)
    code, out, _ = run(["audit", "--json", "--tail", "2"], env, capsys)
    assert code == 0
    assert json.loads(out) == [r.to_json() for r in records[-2:]]


def test_audit_reports_corrupt_lines(
    env: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    add_records(env, 2)
    with audit_file(env).open("a") as fh:
        fh.write("garbage\n")
    code, out, err = run(["audit"], env, capsys)
    assert code == 0
    assert len(out.splitlines()) == 3
    assert "skipped 1 corrupt line" in err


def test_registration_with_the_main_parser() -> None:
    parser = tools.build_parser()
    if not wired():
        policy_cmd.register(_subcommands(parser))
    assert parser.parse_args(["policy", "list"]).func is policy_cmd.cmd_policy_list
    assert parser.parse_args(["audit", "--tail", "3"]).func is policy_cmd.cmd_audit
