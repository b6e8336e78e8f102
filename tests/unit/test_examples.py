"""Checks for the bundled resources: example tools, icons and desktop files.

The example tools under ``resources/examples/tools`` are what a newcomer runs
first, so every ``.meta`` must be well formed and every safe executable must
honour the contract (JSON object on stdin, result on stdout, non-zero exit
with a message on failure). Tools that escape the sandbox (``elevated``,
``sudo``) are not run here, except ``write_protected_note`` with ``HOME``
pointed at a temporary directory.
"""

from __future__ import annotations

import configparser
import json
import os
import platform
import shutil
import stat
import subprocess
import tomllib
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from ollie_tray.app_id import APP_ID, METAINFO_FILE

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "resources" / "examples"
TOOLS = EXAMPLES / "tools"
BROKEN = EXAMPLES / "broken"
SHADOWED = EXAMPLES / "shadowed"
ICONS = REPO / "resources" / "icons"
DESKTOP = REPO / "desktop"

SVG_NS = "{http://www.w3.org/2000/svg}"
TIERS = {"hot", "warm", "cold"}
META_KEYS = {
    "description",
    "prompt",
    "args",
    "tier",
    "readOnly",
    "cmd",
    "sudo",
    "elevated",
    "variants",
}
VARIANT_KEYS = (META_KEYS - {"variants"}) | {"match"}
MATCH_KEYS = {"binary", "file", "os", "arch", "env", "nenv"}

EXPECTED_TOOLS = {
    "system_logs",
    "echo_args",
    "file_info",
    "greet",
    "uname",
    "write_protected_note",
    "whoami_root",
    "gpu_status",
    "desktop_notify",
}
EXPECTED_ICONS = {
    "io.github.ollie_tray.OllieTray",
    "ollie-tray-idle",
    "ollie-tray-pending",
    "ollie-tray-paused",
    "ollie-tray-error",
    "status-available",
    "status-hidden",
    "status-broken",
    "status-shadowed",
}

TOOL_METAS = sorted(TOOLS.glob("*.meta"))
TOOL_EXECUTABLES = sorted(
    p for p in TOOLS.iterdir() if p.is_file() and p.suffix != ".meta" and not p.name.startswith(".")
)
SVGS = sorted(ICONS.glob("*.svg"))
DESKTOP_FILES = sorted(DESKTOP.glob("*.desktop"))


def load_meta(path: Path) -> dict[str, Any]:
    data = json.loads(path.read_text(encoding="utf-8"))
    assert isinstance(data, dict), f"{path.name}: top level must be a JSON object"
    return data


def resolved_definitions(meta: dict[str, Any]) -> list[dict[str, Any]]:
    """The definitions a registry could pick: each variant merged over the top."""
    top = {k: v for k, v in meta.items() if k != "variants"}
    if "variants" not in meta:
        return [top]
    return [{**top, **variant} for variant in meta["variants"]]


def executable_for(meta_path: Path, definition: dict[str, Any]) -> Path:
    """Resolve like the spec: co-located name, then cmd (tools dir, then PATH)."""
    name = meta_path.stem
    colocated = meta_path.parent / name
    if colocated.is_file() and os.access(colocated, os.X_OK):
        return colocated
    cmd = definition.get("cmd")
    assert isinstance(cmd, str), f"{name}: no co-located executable and no cmd"
    if os.path.isabs(cmd):
        return Path(cmd)
    if (meta_path.parent / cmd).is_file():
        return meta_path.parent / cmd
    found = shutil.which(cmd)
    assert found is not None, f"{name}: cmd {cmd!r} not found"
    return Path(found)


def run_tool(
    executable: Path,
    args: object,
    *,
    env: dict[str, str] | None = None,
    raw: str | None = None,
) -> subprocess.CompletedProcess[str]:
    stdin = raw if raw is not None else json.dumps(args)
    return subprocess.run(
        [str(executable)],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
        env=env if env is not None else dict(os.environ),
    )


@pytest.fixture
def bash_only_path(tmp_path: Path) -> str:
    """A PATH holding only bash and cat: no journalctl, nvidia-smi, ..."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for tool in ("bash", "cat"):
        found = shutil.which(tool)
        assert found is not None
        (bindir / tool).symlink_to(found)
    return str(bindir)


# --- .meta files ---------------------------------------------------------------


def test_all_expected_tools_are_bundled() -> None:
    assert {p.stem for p in TOOL_METAS} >= EXPECTED_TOOLS


@pytest.mark.parametrize("meta_path", TOOL_METAS, ids=lambda p: p.stem)
def test_meta_is_well_formed(meta_path: Path) -> None:
    meta = load_meta(meta_path)
    name = meta_path.stem
    assert set(meta) <= META_KEYS, f"unknown keys {set(meta) - META_KEYS}"
    assert isinstance(meta.get("description"), str)
    assert meta["description"].strip()
    for variant in meta.get("variants", []):
        assert set(variant) <= VARIANT_KEYS, f"unknown keys {set(variant) - VARIANT_KEYS}"
        assert isinstance(variant.get("match"), dict)
        assert variant["match"]
        assert set(variant["match"]) <= MATCH_KEYS
        assert all(isinstance(v, str) and v for v in variant["match"].values())

    for definition in resolved_definitions(meta):
        assert isinstance(definition["description"], str)
        assert isinstance(definition.get("prompt"), str)
        assert definition["prompt"].startswith(f"## {name}\n")
        assert f"{name}(" in definition["prompt"], "prompt shows an example call"
        schema = definition.get("args")
        assert isinstance(schema, dict)
        assert schema.get("type") == "object"
        Draft202012Validator.check_schema(schema)
        assert definition.get("tier", "hot") in TIERS
        for flag in ("readOnly", "sudo", "elevated"):
            assert isinstance(definition.get(flag, False), bool)
        if "cmd" in definition:
            assert isinstance(definition["cmd"], str)
            assert definition["cmd"]


@pytest.mark.parametrize("meta_path", TOOL_METAS, ids=lambda p: p.stem)
def test_meta_resolves_to_an_executable(meta_path: Path) -> None:
    for definition in resolved_definitions(load_meta(meta_path)):
        executable = executable_for(meta_path, definition)
        assert executable.is_file()
        assert os.access(executable, os.X_OK)


@pytest.mark.parametrize("meta_path", TOOL_METAS, ids=lambda p: p.stem)
def test_empty_call_is_valid_unless_args_are_required(meta_path: Path) -> None:
    for definition in resolved_definitions(load_meta(meta_path)):
        validator = Draft202012Validator(definition["args"])
        if definition["args"].get("required"):
            assert not validator.is_valid({})
        else:
            assert validator.is_valid({})


@pytest.mark.parametrize("executable", TOOL_EXECUTABLES, ids=lambda p: p.name)
def test_colocated_executable_is_executable_with_shebang(executable: Path) -> None:
    # Shipped as 0755; a checkout under a strict umask may drop group/other x.
    mode = stat.S_IMODE(executable.stat().st_mode)
    assert mode & stat.S_IXUSR
    assert not mode & (stat.S_IWGRP | stat.S_IWOTH)
    first_line = executable.read_text(encoding="utf-8").splitlines()[0]
    assert first_line in {"#!/usr/bin/env bash", "#!/usr/bin/env python3"}


def test_escalating_tools_declare_it() -> None:
    assert load_meta(TOOLS / "write_protected_note.meta")["elevated"] is True
    assert load_meta(TOOLS / "whoami_root.meta")["sudo"] is True
    for name in ("write_protected_note", "whoami_root"):
        assert Draft202012Validator(load_meta(TOOLS / f"{name}.meta")["args"]).is_valid({})


# --- running the safe tools -----------------------------------------------------------


def test_greet_defaults_to_world() -> None:
    done = run_tool(TOOLS / "greet", {})
    assert done.returncode == 0, done.stderr
    assert done.stdout == "Hello, world\n"


def test_greet_uses_name_literally() -> None:
    done = run_tool(TOOLS / "greet", {"name": "Ada $(id) `x`"})
    assert done.returncode == 0, done.stderr
    assert done.stdout == "Hello, Ada $(id) `x`\n"


@pytest.mark.parametrize("raw", ["not json", "[1, 2]", '{"name": 5}'])
def test_greet_rejects_bad_input(raw: str) -> None:
    done = run_tool(TOOLS / "greet", None, raw=raw)
    assert done.returncode != 0
    assert "greet:" in done.stderr


def test_file_info_reports_structured_stat(tmp_path: Path) -> None:
    target = tmp_path / "data.txt"
    target.write_text("twelve bytes", encoding="utf-8")
    target.chmod(0o640)
    done = run_tool(TOOLS / "file_info", {"path": str(target)})
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["content"][0]["type"] == "text"
    text = result["content"][0]["text"]
    assert f"path:     {target}" in text
    assert "size:     12 bytes" in text
    assert "-rw-r----- (0640)" in text
    assert "modified: " in text


@pytest.mark.parametrize(
    ("args", "message"),
    [({}, '"path" is required'), ({"path": "/nonexistent/ollie"}, "cannot stat")],
)
def test_file_info_fails_clearly(args: dict[str, str], message: str) -> None:
    done = run_tool(TOOLS / "file_info", args)
    assert done.returncode == 1
    assert message in done.stderr


def test_echo_args_is_system_cat_echoing_its_input() -> None:
    meta_path = TOOLS / "echo_args.meta"
    meta = load_meta(meta_path)
    assert meta["cmd"] == "/usr/bin/cat"
    assert not (TOOLS / "echo_args").exists()
    raw = '{"message": "hello", "count": 3}'
    done = run_tool(executable_for(meta_path, meta), None, raw=raw)
    assert done.returncode == 0, done.stderr
    assert done.stdout == raw


def test_uname_wrapper_shadows_the_system_binary() -> None:
    meta_path = TOOLS / "uname.meta"
    meta = load_meta(meta_path)
    assert "cmd" not in meta
    assert executable_for(meta_path, meta) == TOOLS / "uname"
    assert shutil.which("uname") is not None, "the wrapper shadows a real binary"


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ({}, None),
        ({"flags": "-r"}, platform.release()),
        ({"flags": "-s"}, platform.system()),
        ({"flags": "-m"}, platform.machine()),
    ],
)
def test_uname_wrapper_runs(args: dict[str, str], expected: str | None) -> None:
    done = run_tool(TOOLS / "uname", args)
    assert done.returncode == 0, done.stderr
    if expected is None:  # -a: everything, starting with the kernel name
        assert done.stdout.startswith(platform.system())
        assert platform.release() in done.stdout
    else:
        assert done.stdout == expected + "\n"


def test_uname_wrapper_rejects_other_flags() -> None:
    done = run_tool(TOOLS / "uname", {"flags": "--help"})
    assert done.returncode == 1
    assert "unsupported arguments" in done.stderr


def test_system_logs_journald_without_journalctl_fails_clearly(bash_only_path: str) -> None:
    env = {**os.environ, "PATH": bash_only_path}
    done = run_tool(TOOLS / "system_logs_journald", {}, env=env)
    assert done.returncode == 1
    assert "journalctl is not installed" in done.stderr


@pytest.mark.skipif(shutil.which("journalctl") is None, reason="journalctl not installed")
def test_system_logs_journald_runs() -> None:
    done = run_tool(TOOLS / "system_logs_journald", {"lines": "5"})
    assert done.returncode == 0, done.stderr
    assert done.stdout


def test_system_logs_journald_validates_lines() -> None:
    done = run_tool(TOOLS / "system_logs_journald", {"lines": "many"})
    assert done.returncode == 1
    assert done.stderr


def test_system_logs_syslog_without_a_log_fails_clearly() -> None:
    if Path("/var/log/syslog").exists() or Path("/var/log/messages").exists():
        pytest.skip("this host has a syslog file")
    done = run_tool(TOOLS / "system_logs_syslog", {})
    assert done.returncode == 1
    assert "neither /var/log/syslog nor /var/log/messages" in done.stderr


@pytest.mark.parametrize("script", ["gpu_status_nvidia", "gpu_status_macos"])
def test_gpu_status_without_its_binary_fails_clearly(script: str, bash_only_path: str) -> None:
    env = {**os.environ, "PATH": bash_only_path}
    done = run_tool(TOOLS / script, {}, env=env)
    assert done.returncode == 1
    assert "gpu_status:" in done.stderr


def test_desktop_notify_terminal_prints_the_notification() -> None:
    args = {"summary": "Build finished", "body": "all green", "urgency": "critical"}
    done = run_tool(TOOLS / "desktop_notify_terminal", args)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "[!] NOTIFICATION: Build finished\nall green\n"


def test_desktop_notify_variants_use_env_conditions() -> None:
    variants = load_meta(TOOLS / "desktop_notify.meta")["variants"]
    assert variants[0]["match"] == {"env": "DISPLAY", "binary": "notify-send"}
    assert variants[-1]["match"] == {"nenv": "DISPLAY"}


def test_write_protected_note_appends_to_home(tmp_path: Path) -> None:
    env = {**os.environ, "HOME": str(tmp_path)}
    first = run_tool(TOOLS / "write_protected_note", {}, env=env)
    second = run_tool(TOOLS / "write_protected_note", {"text": "two\nlines"}, env=env)
    assert first.returncode == 0, first.stderr
    assert second.returncode == 0, second.stderr
    note = tmp_path / "ollie-demo-note.txt"
    assert str(note) in first.stdout
    lines = note.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 2
    assert lines[0].endswith(" hello from ollie")
    assert lines[1].endswith(" two lines")
    assert lines[1] in second.stdout


def test_write_protected_note_fails_when_it_cannot_write(tmp_path: Path) -> None:
    env = {**os.environ, "HOME": str(tmp_path / "missing")}
    done = run_tool(TOOLS / "write_protected_note", {}, env=env)
    assert done.returncode == 1
    assert "cannot write" in done.stderr


# --- broken and shadowed examples ------------------------------------------------


def test_broken_example_has_a_json_error_on_a_known_line() -> None:
    with pytest.raises(json.JSONDecodeError) as caught:
        json.loads((BROKEN / "broken_example.meta").read_text(encoding="utf-8"))
    assert (caught.value.lineno, caught.value.colno) == (5, 3)


def test_bad_tier_is_valid_json_with_an_unknown_tier() -> None:
    meta = load_meta(BROKEN / "bad_tier.meta")
    assert meta["tier"] == "lukewarm"
    assert meta["tier"] not in TIERS


@pytest.mark.parametrize("meta_path", sorted(BROKEN.glob("*.meta")), ids=lambda p: p.stem)
def test_everything_in_broken_is_broken(meta_path: Path) -> None:
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
    except json.JSONDecodeError:
        return
    assert meta.get("tier") not in TIERS


def test_broken_folder_explains_itself() -> None:
    readme = (BROKEN / "README.md").read_text(encoding="utf-8")
    for meta_path in BROKEN.glob("*.meta"):
        assert meta_path.name in readme


@pytest.mark.parametrize("meta_path", sorted(SHADOWED.glob("*.meta")), ids=lambda p: p.stem)
def test_shadowed_examples_are_valid_and_shadowed_by_tools(meta_path: Path) -> None:
    meta = load_meta(meta_path)
    Draft202012Validator.check_schema(meta["args"])
    assert (TOOLS / meta_path.name).is_file()


def test_examples_readme_lists_every_tool() -> None:
    readme = (EXAMPLES / "README.md").read_text(encoding="utf-8")
    for meta_path in TOOL_METAS:
        assert f"`{meta_path.stem}`" in readme


# --- icons -------------------------------------------------------------------


def test_all_expected_icons_exist() -> None:
    assert {p.stem for p in SVGS} >= EXPECTED_ICONS


@pytest.mark.parametrize("svg", SVGS, ids=lambda p: p.stem)
def test_icon_is_a_24px_svg(svg: Path) -> None:
    root = ET.parse(svg).getroot()
    assert root.tag == f"{SVG_NS}svg"
    assert root.get("viewBox") == "0 0 24 24"


@pytest.mark.parametrize("svg", SVGS, ids=lambda p: p.stem)
def test_icon_renders(svg: Path) -> None:
    qtgui = pytest.importorskip("PySide6.QtGui")
    qtsvg = pytest.importorskip("PySide6.QtSvg")
    renderer = qtsvg.QSvgRenderer(str(svg))
    assert renderer.isValid()
    image = qtgui.QImage(24, 24, qtgui.QImage.Format.Format_ARGB32)
    image.fill(0)
    painter = qtgui.QPainter(image)
    renderer.render(painter)
    painter.end()
    opaque = sum(1 for x in range(24) for y in range(24) if image.pixelColor(x, y).alpha() > 0)
    # A visible glyph that does not just fill the square.
    assert 24 * 24 * 0.3 < opaque < 24 * 24 * 0.95


# --- desktop integration -------------------------------------------------------------


def read_ini(path: Path) -> configparser.ConfigParser:
    parser = configparser.ConfigParser(interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read(path, encoding="utf-8")
    return parser


def test_desktop_files_exist() -> None:
    assert {p.name for p in DESKTOP_FILES} == {
        "io.github.ollie_tray.OllieTray.desktop",
        "io.github.ollie_tray.OllieTray-autostart.desktop",
    }
    assert (DESKTOP / "ollie-tray.service").is_file()


@pytest.mark.parametrize("desktop_file", DESKTOP_FILES, ids=lambda p: p.name)
def test_desktop_file_launches_ollie_tray(desktop_file: Path) -> None:
    entry = read_ini(desktop_file)["Desktop Entry"]
    assert entry["Type"] == "Application"
    assert entry["Exec"] == "ollie-tray"
    assert (ICONS / f"{entry['Icon']}.svg").is_file()


def test_autostart_entry_waits_for_the_panel() -> None:
    entry = read_ini(DESKTOP / "io.github.ollie_tray.OllieTray-autostart.desktop")["Desktop Entry"]
    assert entry["X-GNOME-Autostart-enabled"] == "true"
    assert entry["X-KDE-autostart-after"] == "panel"


@pytest.mark.realstack
@pytest.mark.parametrize("desktop_file", DESKTOP_FILES, ids=lambda p: p.name)
def test_desktop_file_validates(desktop_file: Path) -> None:
    validator = shutil.which("desktop-file-validate")
    if validator is None:
        if os.environ.get("CI") == "true":
            pytest.fail("desktop-file-validate is missing (package desktop-file-utils)")
        pytest.skip("desktop-file-validate not installed")
    done = subprocess.run(
        [validator, str(desktop_file)], capture_output=True, text=True, timeout=30, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout == "", "no warnings or hints either"


@pytest.mark.parametrize("desktop_file", DESKTOP_FILES, ids=lambda p: p.name)
def test_desktop_files_name_the_application_id_icon(desktop_file: Path) -> None:
    entry = read_ini(desktop_file)["Desktop Entry"]
    assert entry["Icon"] == APP_ID


@pytest.mark.realstack
def test_metainfo_passes_appstreamcli_validate() -> None:
    validator = shutil.which("appstreamcli")
    if validator is None:
        if os.environ.get("CI") == "true":
            pytest.fail("appstreamcli is missing (package appstream)")
        pytest.skip("appstreamcli not installed")
    done = subprocess.run(
        [validator, "validate", "--no-net", str(DESKTOP / METAINFO_FILE)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_metainfo_matches_the_project() -> None:
    root = ET.parse(DESKTOP / METAINFO_FILE).getroot()
    assert root.findtext("id") == APP_ID
    assert root.findtext("launchable") == f"{APP_ID}.desktop"
    assert (DESKTOP / f"{APP_ID}.desktop").is_file()
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    scripts = {*project["scripts"], *project["gui-scripts"]}
    assert {b.text for b in root.iter("binary")} == scripts
    versions = [r.get("version") for r in root.iter("release")]
    assert project["version"] in versions
    for image in root.iter("image"):
        assert image.text is not None
        prefix = "https://raw.githubusercontent.com/ollie-tray/ollie-tray/main/"
        assert image.text.startswith(prefix)
        assert (REPO / image.text.removeprefix(prefix)).is_file()


def test_systemd_user_unit() -> None:
    unit = read_ini(DESKTOP / "ollie-tray.service")
    assert unit["Service"]["Type"] == "simple"
    assert unit["Service"]["ExecStart"] == "/usr/bin/env ollie-tray"
    assert unit["Service"]["Restart"] == "on-failure"
    assert unit["Unit"]["PartOf"] == "graphical-session.target"
    assert unit["Unit"]["After"] == "graphical-session.target"
    assert unit["Install"]["WantedBy"] == "graphical-session.target"
