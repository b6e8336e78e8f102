"""``ollie-tools sandbox show``: effective rules after template expansion, and the kernel ABI."""

from __future__ import annotations

import io
import json
import os
import re
import sys
from pathlib import Path

import pytest

from registry_core.cli.tools import main
from registry_core.paths import resources_dir
from registry_core.sandbox import abi_version

SHIPPED_PROFILE = resources_dir() / "sandbox" / "default.yaml"


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for sub in ("home", "config", "tmp", "tools", "work"):
        (tmp_path / sub).mkdir()
    for name in list(os.environ):
        monkeypatch.delenv(name)
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    monkeypatch.setenv("OLLIE_TOOLS_PATH", str(tmp_path / "tools"))
    monkeypatch.chdir(tmp_path / "work")
    return tmp_path


def show(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    code = main(["sandbox", "show", *argv], out=out)
    return code, out.getvalue()


def write_profile(root: Path, name: str, text: str) -> Path:
    path = root / "config" / "ollie" / "sandbox" / f"{name}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_json_has_the_effective_rules_and_the_kernel_abi(root: Path) -> None:
    code, out = show("--json")
    assert code == 0
    doc = json.loads(out)
    installed = root / "config" / "ollie" / "sandbox" / "default.yaml"
    assert installed.read_bytes() == SHIPPED_PROFILE.read_bytes()  # installed on first use
    assert doc["profile"] == "default"
    assert doc["source"] == str(installed)
    assert doc["kernel_abi"] == abi_version()
    assert doc["landlock"] is (abi_version() >= 1)
    rules = {(entry["path"], entry["access"]) for entry in doc["filesystem"]}
    # Templates expanded: {CWD}, {TMPDIR} (the call's private /tmp), {OLLIE_TOOLS_PATH}.
    assert (str(root / "work"), "rw") in rules
    assert ("/tmp", "rw") in rules
    view = doc["namespaces"]["view"]
    assert {"kind": "rw", "path": "/tmp", "detail": "private, removed after the call"} in view
    assert (str(root / "tools"), "rox") in rules
    assert ("/usr", "rox") in rules
    assert ("/etc", "ro") in rules
    assert not any("{" in entry["path"] for entry in doc["filesystem"])
    by_path = {entry["path"]: entry for entry in doc["filesystem"]}
    assert by_path[str(root / "work")]["kind"] == "dir"
    assert "write_file" in by_path[str(root / "work")]["rights"] or abi_version() < 1
    assert doc["network"] == {"mode": "restricted", "bind_tcp": [], "connect_tcp": [53, 80, 443]}
    assert "DISPLAY" not in doc["env"]
    assert {"PATH", "HOME", "LANG"} <= set(doc["env"])
    assert {gap["feature"] for gap in doc["unenforced"]} >= {"udp", "unix_sockets"}
    assert isinstance(doc["warnings"], list)
    assert isinstance(doc["skipped"], list)


def test_a_named_profile_with_ports_as_strings_and_unknown_keys(root: Path) -> None:
    path = write_profile(
        root,
        "custom",
        'filesystem:\n  rwx: ["{CWD}"]\n  ro: ["{HOME}/.gitconfig"]\n'
        'network:\n  enabled: true\n  connect_tcp: ["8443", 22]\n  bind_tcp: [8080]\n'
        "env: [PATH, DISPLAY]\nsurprise: true\n",
    )
    code, out = show("--profile", "custom", "--json")
    assert code == 0
    doc = json.loads(out)
    assert (doc["profile"], doc["source"]) == ("custom", str(path))
    assert [(e["path"], e["access"]) for e in doc["filesystem"]] == [
        (str(root / "home" / ".gitconfig"), "ro"),
        (str(root / "work"), "rwx"),
    ]
    assert doc["filesystem"][0]["kind"] == "missing"
    assert doc["network"]["connect_tcp"] == [8443, 22]
    assert doc["network"]["bind_tcp"] == [8080]
    assert doc["env"] == ["PATH", "DISPLAY"]
    assert any("surprise" in warning for warning in doc["warnings"])


def test_missing_and_bad_profiles_are_errors(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert show("--profile", "nope") == (1, "")
    assert "sandbox profile not found" in capsys.readouterr().err
    path = write_profile(root, "bad", "filesystem:\n  ro: /etc\n")
    assert show("--profile", "bad") == (1, "")
    assert f"{path}: filesystem.ro: expected a list of strings" in capsys.readouterr().err


def sections(text: str) -> dict[str, list[str]]:
    """Text output split into its titled sections (the header is under "")."""
    found: dict[str, list[str]] = {"": []}
    current = ""
    for line in text.splitlines():
        if line and not line.startswith(" ") and line.endswith(":"):
            current = line[:-1]
            found[current] = []
        elif line:
            found[current].append(line)
    return found


def column_starts(line: str) -> list[int]:
    """Where each cell starts: cells are separated by two or more spaces."""
    body = line.lstrip(" ")
    indent = len(line) - len(body)
    return [indent] + [indent + m.end() for m in re.finditer(r" {2,}", body)]


def test_text_output_is_aligned(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (root / "work" / "a-much-longer-directory-name-than-usual").mkdir()
    monkeypatch.chdir(root / "work" / "a-much-longer-directory-name-than-usual")
    code, out = show()
    assert code == 0
    parts = sections(out)
    header = parts[""]
    assert [line.split(":")[0] for line in header] == ["Profile", "Landlock", "Best effort"]
    assert len({column_starts(line)[1] for line in header}) == 1
    assert header[1].endswith(f"ABI {abi_version()}" if abi_version() >= 1 else "not available")
    rows = parts["Filesystem"]
    assert len(rows) >= 10
    starts = {tuple(column_starts(row)) for row in rows}
    assert len(starts) == 1, rows  # every cell of every row starts in the same column
    (only,) = starts
    assert len(only) == 4  # access, path, kind, origin
    assert any(str(root / "work") in row for row in rows)
    network = parts["Network"]
    assert network[0].split() == ["mode", "restricted"]
    assert len({column_starts(line)[1] for line in network}) == 1
    assert "53, 80, 443" in out
    assert not any(line != line.rstrip() for line in out.splitlines())


def test_it_says_when_calls_from_this_directory_are_refused(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    code, out = show("--json")
    assert code == 0
    assert json.loads(out)["working_directory"] == {"path": str(root / "work"), "refused": None}
    monkeypatch.chdir(root / "home")
    code, out = show()
    assert code == 0
    assert "Working directory: REFUSED here: refusing to run a sandboxed tool in" in out
    assert "your home directory" in out


def check(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    code = main(["sandbox", "check", *argv], out=out)
    return code, out.getvalue()


def test_check_passes_the_default_profile_in_a_project_directory(root: Path) -> None:
    code, out = check()
    assert code == 0
    assert out.endswith(f"ok: calls from {root / 'work'} may run with it\n")


def test_check_refuses_a_profile_opening_ollies_configuration(root: Path) -> None:
    path = write_profile(
        root, "open", 'filesystem:\n  rw:\n    - "{CWD}"\n    - "{XDG_CONFIG_HOME}"\n'
    )
    code, out = check("--profile", "open")
    assert code == 1
    assert out == (
        f"REFUSED: {path}: sandbox profile 'open' grants rw on '{{XDG_CONFIG_HOME}}'"
        f" (filesystem.rw, line 4, {root / 'config'}), which is above Ollie's configuration"
        f" directory ({root / 'config' / 'ollie'}): a tool could change Ollie's own"
        " configuration, state or installation, and what it writes there runs outside the"
        " sandbox. Remove or narrow that rule.\n"
    )
    # sandbox show still describes it, and says so.
    code, out = show("--profile", "open")
    assert code == 0
    assert "Profile: REFUSED: " in out and "filesystem.rw, line 4" in out
    code, out = show("--profile", "open", "--json")
    assert "filesystem.rw, line 4" in json.loads(out)["refused"]
    assert json.loads(show("--json")[1])["refused"] is None


def test_check_refuses_a_working_directory_holding_ollies_installation(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(os.path.dirname(os.path.realpath(sys.prefix)))
    code, out = check()
    assert code == 1
    assert "\nREFUSED: refusing to run a sandboxed tool in " in out  # after the install note
    assert "Ollie's Python installation (sys.prefix)" in out
