""" "What if…": evaluate the registry for another host, clearly labelled as simulated."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from pytestqt.qtbot import QtBot

from ollie_tray.browser import BrowserWindow
from ollie_tray.browser.model import RowStatus
from ollie_tray.browser.whatif import (
    WhatIf,
    WhatIfError,
    evaluate_meta_file,
    parse_binaries,
    parse_env,
    parse_names,
    simulated_loader,
)
from registry_core.registry import HostFacts, RegistryLoader, Status

MakeWindow = Callable[..., BrowserWindow]


def test_parse_env_sets_and_unsets() -> None:
    values, unset = parse_env("# comment\nDISPLAY=:0\nEMPTY=\n-SSH_CONNECTION\nunset HOME\n")
    assert values == {"DISPLAY": ":0", "EMPTY": ""}
    assert unset == {"SSH_CONNECTION", "HOME"}
    with pytest.raises(WhatIfError, match="Environment, line 2: write KEY=VALUE"):
        parse_env("A=1\nnonsense\n")
    with pytest.raises(WhatIfError, match="not a variable name"):
        parse_env("-1BAD")


def test_parse_binaries_and_paths() -> None:
    assert parse_binaries("nvidia-smi=/opt/bin/nvidia-smi\njq\n") == {
        "nvidia-smi": "/opt/bin/nvidia-smi",
        "jq": "/usr/bin/jq",
    }
    with pytest.raises(WhatIfError, match="line 1: 'bin/x' is not an absolute path"):
        parse_binaries("x=bin/x")
    with pytest.raises(WhatIfError, match="write name=/path"):
        parse_binaries("/usr/bin/x")
    assert parse_names("/a\n\n/b\n", "Files present", absolute=True) == {"/a", "/b"}
    with pytest.raises(WhatIfError, match="Files absent, line 1"):
        parse_names("relative", "Files absent", absolute=True)


def test_what_if_facts_override_the_host() -> None:
    base = HostFacts(os_name="linux", arch="amd64", env={"PATH": "/usr/bin", "DISPLAY": ":1"})
    what_if = WhatIf(
        os_name="darwin",
        path="/opt/bin",
        env={"X": "1"},
        unset=frozenset({"DISPLAY"}),
        binaries={"jq": "/opt/bin/jq"},
        missing_binaries=frozenset({"sh"}),
        present_files=frozenset({"/var/log/syslog"}),
        absent_files=frozenset({"/etc/os-release"}),
    )
    facts = what_if.facts(base)
    assert facts.simulated
    assert (facts.os_name, facts.arch) == ("darwin", "amd64")
    assert facts.env == {"PATH": "/opt/bin", "X": "1"}
    assert facts.find_binary("jq") == "/opt/bin/jq"
    assert facts.find_binary("sh") is None
    assert facts.file_exists("/var/log/syslog")
    assert not facts.file_exists("/etc/os-release")
    assert what_if.describe() == (
        "os=darwin, PATH overridden, X='1', unset DISPLAY, +binary jq, no binary sh,"
        " +file /var/log/syslog, no file /etc/os-release"
    )
    assert WhatIf().is_empty()
    assert WhatIf().describe() == "no overrides"


def test_simulated_loader_leaves_the_real_registry_alone(loader: RegistryLoader) -> None:
    real = loader.load()
    sim = simulated_loader(loader, WhatIf(binaries={"nvidia-smi": "/usr/bin/nvidia-smi"}))
    simulated = sim.load()
    assert simulated.tools["gpu_status"].variant == 0
    assert simulated.host["simulated"] is True
    assert real.tools["gpu_status"].status is Status.HIDDEN
    assert loader.current.tools["gpu_status"].status is Status.HIDDEN


def test_evaluate_meta_file_reports_unreadable_and_broken_files(
    tmp_path: Path, demo_dirs: list[Path]
) -> None:
    facts = HostFacts(env={"PATH": ""})
    missing = evaluate_meta_file(tmp_path / "gone.meta", facts)
    assert (missing.name, missing.status) == ("gone", Status.BROKEN)
    assert "cannot read" in missing.errors[0].message
    broken = evaluate_meta_file(demo_dirs[1] / "broken_example.meta", facts)
    assert broken.errors[0].line == 5
    shadowed = evaluate_meta_file(demo_dirs[2] / "greet.meta", facts)
    assert shadowed.status is Status.AVAILABLE
    assert str(shadowed.executable) == "/usr/bin/cat"


def _open_what_if(window: BrowserWindow) -> None:
    window.whatif_action.trigger()
    assert window.whatif_dock.isVisible()


def test_adding_a_binary_flips_gpu_status_and_clearing_restores(
    qtbot: QtBot, make_window: MakeWindow
) -> None:
    window = make_window()
    window.select_tool("gpu_status")
    _open_what_if(window)
    panel = window.whatif_panel
    panel.binaries_edit.setPlainText("nvidia-smi=/usr/bin/nvidia-smi")
    with qtbot.waitSignal(window.registry_changed) as blocker:
        panel.apply_button.click()
    assert blocker.args[0].tools["gpu_status"].variant == 0
    row = window.selected_row()
    assert row is not None
    assert (row.name, row.status) == ("gpu_status", RowStatus.AVAILABLE)
    assert window.banner.isVisible()
    assert window.banner.text().startswith("SIMULATED host — +binary nvidia-smi")
    details = window.details
    assert details.status_chip.text() == "SIMULATED · AVAILABLE"
    assert "SIMULATED" in details.notice.text()
    assert details.condition_texts()[0] == (
        "binary nvidia-smi → found at /usr/bin/nvidia-smi (simulated)"
    )
    assert window.count_label.text().endswith("(SIMULATED)")
    assert window.loader.current.tools["gpu_status"].status is Status.HIDDEN  # real: unchanged

    with qtbot.waitSignal(window.registry_changed):
        panel.clear_button.click()
    assert not window.banner.isVisible()
    assert window.selected_tool() == "gpu_status"
    assert window.details.status_chip.text() == "HIDDEN"
    assert window.details.condition_texts()[0] == "binary nvidia-smi → not found on PATH"
    assert panel.binaries_edit.toPlainText() == ""


def test_os_darwin_alone_is_not_enough_but_with_system_profiler_it_is(
    qtbot: QtBot, make_window: MakeWindow
) -> None:
    window = make_window()
    window.select_tool("gpu_status")
    panel = window.whatif_panel
    panel.os_combo.setEditText("darwin")
    with qtbot.waitSignal(window.registry_changed):
        panel.apply()
    assert window.details.condition_texts()[1:] == [
        "os darwin → host os is darwin (simulated)",
        "binary system_profiler → not found on PATH (simulated)",
    ]
    assert window.details.status_chip.text() == "SIMULATED · HIDDEN"
    panel.binaries_edit.setPlainText("system_profiler=/usr/sbin/system_profiler")
    with qtbot.waitSignal(window.registry_changed) as blocker:
        panel.apply()
    tool = blocker.args[0].tools["gpu_status"]
    assert (tool.status, tool.variant) == (Status.AVAILABLE, 1)
    assert tool.executable.name == "gpu_status_macos"
    assert "Variant 1 — selected" in window.details.variants.topLevelItem(1).text(0)  # type: ignore[union-attr]


def test_environment_path_and_files_change_other_variants(
    qtbot: QtBot, make_window: MakeWindow
) -> None:
    window = make_window()
    panel = window.whatif_panel
    panel.env_edit.setPlainText("DISPLAY=:0")
    panel.binaries_edit.setPlainText("notify-send")
    panel.path_edit.setText("/nonexistent")  # journalctl no longer on PATH …
    panel.present_edit.setPlainText("/var/log/syslog")  # … but syslog is there
    with qtbot.waitSignal(window.registry_changed) as blocker:
        panel.apply()
    tools = blocker.args[0].tools
    assert tools["desktop_notify"].variant == 0
    assert tools["system_logs"].variant == 1
    panel.env_edit.setPlainText("-DISPLAY")
    panel.missing_edit.setPlainText("journalctl")
    panel.path_edit.clear()
    panel.present_edit.clear()
    panel.absent_edit.setPlainText("/var/log/syslog")
    with qtbot.waitSignal(window.registry_changed) as blocker:
        panel.apply()
    tools = blocker.args[0].tools
    assert tools["desktop_notify"].variant == 1
    assert tools["system_logs"].status is Status.HIDDEN


def test_bad_input_is_reported_and_nothing_changes(qtbot: QtBot, make_window: MakeWindow) -> None:
    window = make_window()
    panel = window.whatif_panel
    panel.env_edit.setPlainText("oops")
    with qtbot.assertNotEmitted(window.registry_changed):
        panel.apply()
    assert panel.error_label.isVisibleTo(panel)
    assert "Environment, line 1" in panel.error_label.text()
    assert window.what_if is None


def test_an_empty_form_is_no_simulation(qtbot: QtBot, make_window: MakeWindow) -> None:
    window = make_window()
    with qtbot.waitSignal(window.whatif_panel.changed) as blocker:
        window.whatif_panel.apply()
    assert blocker.args == [None]
    assert not window.banner.isVisible()


def test_live_changes_are_evaluated_for_the_simulated_host(
    qtbot: QtBot, make_window: MakeWindow, demo_dirs: list[Path]
) -> None:
    window = make_window(live=True)
    window.whatif_panel.os_combo.setEditText("freebsd")
    with qtbot.waitSignal(window.registry_changed):
        window.whatif_panel.apply()
    meta = {
        "description": "BSD only.",
        "cmd": "/usr/bin/cat",
        "variants": [{"match": {"os": "freebsd"}}],
    }
    with qtbot.waitSignal(window.registry_changed, timeout=5000) as blocker:
        (demo_dirs[0] / "bsd_only.meta").write_text(json.dumps(meta))
    assert blocker.args[0].tools["bsd_only"].status is Status.AVAILABLE
    assert window.loader.current.tools["bsd_only"].status is Status.HIDDEN
    assert window.open_run_form() is None  # never run tools for a simulated host
