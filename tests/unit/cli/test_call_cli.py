"""``ollie-tools call``: arguments, exit codes, --json, --timeout and elevation refusal."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from registry_core.cli.call_cmd import exit_status
from registry_core.cli.tools import main
from registry_core.paths import resources_dir
from registry_core.sandbox import abi_version

REPO = Path(__file__).resolve().parents[3]
EXAMPLES = resources_dir() / "examples" / "tools"
OLLIE_TOOLS = Path(sys.executable).parent / "ollie-tools"
SHIPPED_PROFILE = resources_dir() / "sandbox" / "default.yaml"


class Cli:
    """An isolated environment for ``ollie-tools`` with the demo tools plus our own."""

    def __init__(self, root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.root = root
        self.tools = root / "tools"
        shutil.copytree(EXAMPLES, self.tools)
        for sub in ("home", "config", "runtime", "tmp", "work"):
            (root / sub).mkdir()
        self.cwd = root / "work"
        self.env = {
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "LANG": "C.UTF-8",
            "HOME": str(root / "home"),
            "TMPDIR": str(root / "tmp"),
            "XDG_CONFIG_HOME": str(root / "config"),
            "XDG_RUNTIME_DIR": str(root / "runtime"),
            "XDG_STATE_HOME": str(root / "state"),
            "OLLIE_TOOLS_PATH": str(self.tools),
            "OLLIE_ELEVATE_SOCKET": str(root / "runtime" / "no-broker" / "elevate.sock"),
        }
        for name in list(os.environ):
            monkeypatch.delenv(name)
        for name, value in self.env.items():
            monkeypatch.setenv(name, value)
        monkeypatch.chdir(self.cwd)
        if abi_version() < 1:
            # No Landlock on this kernel: keep the CLI testable (CI has Landlock).
            profile = root / "config" / "ollie" / "sandbox" / "default.yaml"
            profile.parent.mkdir(parents=True)
            text = SHIPPED_PROFILE.read_text().replace("best_effort: false", "best_effort: true")
            profile.write_text(text)

    def tool(self, name: str, script: str, **meta: Any) -> None:
        (self.tools / f"{name}.meta").write_text(json.dumps({"description": name, **meta}))
        exe = self.tools / name
        exe.write_text(script)
        exe.chmod(0o755)

    def run(self, *argv: str) -> tuple[int, str]:
        out = io.StringIO()
        code = main(list(argv), out=out)
        return code, out.getvalue()


@pytest.fixture
def cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Cli:
    return Cli(tmp_path, monkeypatch)


def test_args_inline(cli: Cli) -> None:
    assert cli.run("call", "greet", "--args", '{"name": "Ann"}') == (0, "Hello, Ann\n")


def test_args_default_to_an_empty_object(cli: Cli) -> None:
    assert cli.run("call", "greet") == (0, "Hello, world\n")


def test_args_from_a_file(cli: Cli) -> None:
    path = cli.root / "args.json"
    path.write_text('{\n  "name": "Bo"\n}\n')
    assert cli.run("call", "greet", "--args", f"@{path}") == (0, "Hello, Bo\n")


def test_args_from_stdin(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO('{"name": "Cy"}'))
    assert cli.run("call", "greet", "--args", "-") == (0, "Hello, Cy\n")


def test_invalid_json_is_a_usage_error_with_line_and_column(
    cli: Cli, capsys: pytest.CaptureFixture[str]
) -> None:
    cli.tool("marker", "#!/bin/sh\ntouch ran\n")
    code, out = cli.run("call", "marker", "--args", '{"name": }')
    assert (code, out) == (2, "")
    err = capsys.readouterr().err
    assert "invalid JSON at line 1 column 10" in err
    path = cli.root / "args.json"
    path.write_text('{\n  "name": "x",\n}\n')
    assert cli.run("call", "marker", "--args", f"@{path}")[0] == 2
    assert f"{path}: invalid JSON at line 3 column 1" in capsys.readouterr().err
    assert not (cli.cwd / "ran").exists()


def test_unreadable_args_file_is_a_usage_error(
    cli: Cli, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.run("call", "greet", "--args", "@/no/such/file.json")[0] == 2
    assert "cannot read --args file /no/such/file.json" in capsys.readouterr().err


def test_schema_violation_is_a_usage_error_naming_the_field(
    cli: Cli, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.run("call", "file_info", "--args", "{}") == (2, "")
    assert "invalid argument path: is required" in capsys.readouterr().err
    assert cli.run("call", "greet", "--args", '{"name": 5}') == (2, "")
    assert "invalid argument name: 5 is not of type 'string'" in capsys.readouterr().err


def test_the_exit_code_is_the_tools(cli: Cli, capsys: pytest.CaptureFixture[str]) -> None:
    cli.tool("fails", "#!/bin/sh\ncat >/dev/null\necho partial\necho broken >&2\nexit 3\n")
    assert cli.run("call", "fails") == (3, "partial\n")
    assert capsys.readouterr().err == "broken\n"


def test_a_tool_killed_by_a_signal_exits_like_a_shell_reports_it(cli: Cli) -> None:
    cli.tool("killed", "#!/bin/sh\ncat >/dev/null\nkill -9 $$\n")
    assert cli.run("call", "killed")[0] == 128 + 9
    assert exit_status(-15) == 143
    assert exit_status(0) == 0
    assert exit_status(5) == 5


def test_json_output(cli: Cli) -> None:
    code, out = cli.run("call", "greet", "--args", '{"name": "Ann"}', "--json")
    assert code == 0
    doc = json.loads(out)
    assert doc["exit_code"] == 0
    assert doc["stdout"] == "Hello, Ann\n"
    assert doc["stderr"] == ""
    assert doc["content"] == [{"type": "text", "text": "Hello, Ann\n"}]
    assert doc["sandboxed"] is (abi_version() >= 1)


def test_json_output_of_a_failure_and_of_structured_output(cli: Cli) -> None:
    cli.tool("fails", "#!/bin/sh\ncat >/dev/null\necho why >&2\nexit 4\n")
    code, out = cli.run("call", "fails", "--json")
    doc = json.loads(out)
    assert code == 4
    assert (doc["exit_code"], doc["stdout"], doc["stderr"]) == (4, "", "why\n")
    assert doc["content"] == [{"type": "text", "text": "why\n"}]
    (cli.cwd / "f.txt").write_text("abc")
    code, out = cli.run("call", "file_info", "--args", '{"path": "f.txt"}', "--json")
    doc = json.loads(out)
    assert code == 0
    assert doc["structured"] is True
    assert "size:     3 bytes" in doc["content"][0]["text"]


def test_timeout(cli: Cli, capsys: pytest.CaptureFixture[str]) -> None:
    cli.tool("slow", "#!/bin/sh\nexec sleep 60\n")
    assert cli.run("call", "slow", "--timeout", "0.5") == (124, "")
    assert "timed out after 0.5 s" in capsys.readouterr().err
    code, out = cli.run("call", "slow", "--timeout", "0.5", "--json")
    assert code == 124
    assert json.loads(out)["timed_out"] is True


@pytest.mark.parametrize("value", ["0", "-1"])
def test_timeout_must_be_positive(cli: Cli, capsys: pytest.CaptureFixture[str], value: str) -> None:
    assert cli.run("call", "greet", "--timeout", value) == (2, "")
    assert "--timeout must be positive" in capsys.readouterr().err


def test_unknown_tool_is_a_refusal(cli: Cli, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.run("call", "ghost") == (77, "")
    assert capsys.readouterr().err == "unknown tool: no tool named 'ghost'\n"


def test_bad_profile_never_runs_the_tool(cli: Cli, capsys: pytest.CaptureFixture[str]) -> None:
    cli.tool("marker", "#!/bin/sh\ntouch ran\n")
    profile = cli.root / "config" / "ollie" / "sandbox" / "broken.yaml"
    profile.parent.mkdir(parents=True, exist_ok=True)
    profile.write_text("network: {connect_tcp: [http]}\n")
    assert cli.run("call", "marker", "--profile", "broken") == (1, "")
    assert f"{profile}: network.connect_tcp" in capsys.readouterr().err
    assert not (cli.cwd / "ran").exists()


def test_verbose_reports_what_is_not_enforced(cli: Cli, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.run("call", "greet", "-v")[0] == 0
    assert "not enforced: udp" in capsys.readouterr().err


def subprocess_env(cli: Cli) -> dict[str, str]:
    """The isolated environment: no DISPLAY, WAYLAND_DISPLAY or D-Bus, so no desktop front-end."""
    return dict(cli.env)


def test_real_command_calls_greet(cli: Cli) -> None:
    done = subprocess.run(
        [str(OLLIE_TOOLS), "call", "greet", "--args", '{"name":"Ann"}'],
        env=subprocess_env(cli),
        cwd=cli.cwd,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, "Hello, Ann\n", "")


@pytest.mark.parametrize(
    "argv",
    [
        ["call", "write_protected_note", "--args", '{"text": "hi"}'],
        ["call", "whoami_root"],
        ["call", "greet", "--elevated"],
    ],
)
def test_elevation_without_broker_or_front_end_is_denied(cli: Cli, argv: list[str]) -> None:
    assert not Path(cli.env["OLLIE_ELEVATE_SOCKET"]).exists()
    done = subprocess.run(
        [str(OLLIE_TOOLS), *argv],
        env=subprocess_env(cli),
        cwd=cli.cwd,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        start_new_session=True,  # no controlling terminal: the terminal front-end cannot ask
        check=False,
    )
    assert done.returncode == 77, done.stderr
    assert done.stdout == ""
    assert "elevation denied:" in done.stderr
    assert not (cli.root / "home" / "ollie-demo-note.txt").exists()
