"""Where the shipped data is found: a packager's override, the checkout, the wheel, share/."""

from __future__ import annotations

from pathlib import Path

import pytest

from registry_core import paths

REPO = Path(__file__).resolve().parents[2]


def _shipped(root: Path) -> Path:
    (root / "sandbox").mkdir(parents=True)
    (root / "sandbox" / "default.yaml").write_text("version: 1\n")
    return root


def test_the_checkout_uses_its_own_resources_and_desktop_files() -> None:
    assert paths.resources_dir({}) == REPO / "resources"
    assert paths.desktop_dir({}) == REPO / "desktop"


def test_the_environment_override_wins(tmp_path: Path) -> None:
    env = {paths.RESOURCES_ENV: str(tmp_path)}
    assert paths.resources_dir(env) == tmp_path
    assert paths.desktop_dir(env) == tmp_path / "desktop"


def test_the_first_root_holding_the_default_profile_is_taken(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    empty, wheel, share = tmp_path / "checkout", tmp_path / "wheel", tmp_path / "share"
    empty.mkdir()
    _shipped(wheel)
    _shipped(share)
    roots = [(empty, empty / "d"), (wheel, wheel / "desktop"), (share, share / "desktop")]
    monkeypatch.setattr(paths, "_resource_roots", lambda: roots)
    assert paths.resources_dir({}) == wheel
    assert paths.desktop_dir({}) == wheel / "desktop"


def test_a_distributions_share_directory_is_searched(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(paths.sys, "prefix", "/opt/example")
    shares = [str(r) for r, _ in paths._resource_roots()]
    assert "/opt/example/share/ollie-tray" in shares
    assert "/usr/share/ollie-tray" in shares
    assert shares.index("/opt/example/share/ollie-tray") < shares.index("/usr/share/ollie-tray")


def test_without_any_shipped_data_the_checkout_path_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    roots = [(tmp_path / "a", tmp_path / "a" / "desktop"), (tmp_path / "b", tmp_path / "bd")]
    monkeypatch.setattr(paths, "_resource_roots", lambda: roots)
    assert paths.resources_dir({}) == tmp_path / "a"
