"""``make mutate`` keeps measuring the approval dialog.

mutmut's default isolation runs several pytest sessions in its own process,
and Qt does not survive a second one: the tray tests had to be left out, and
the dialog's mutants then found no test and went unmeasured without an
error.  The configuration must keep the tray tests in the run and every test
run in a process of its own (mutmut's fork server).
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def mutmut_config() -> dict[str, Any]:
    document = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    config: dict[str, Any] = document["tool"]["mutmut"]
    return config


def test_the_dialog_is_mutated_and_its_tests_are_selected() -> None:
    config = mutmut_config()
    assert "ollie_tray/dialogs/approval.py" in config["only_mutate"]
    selection: list[str] = config["pytest_add_cli_args_test_selection"]
    assert "tests/unit" in selection
    assert not [arg for arg in selection if "tray" in arg]  # no --ignore of the tray tests
    extra: list[str] = config.get("pytest_add_cli_args", [])
    assert not [arg for arg in extra if "tray" in arg]


def test_every_test_run_has_a_process_of_its_own() -> None:
    assert mutmut_config()["process_isolation"] == "forkserver"
    assert "'mutmut>=3.8.1'" in (ROOT / "Makefile").read_text(encoding="utf-8")
