"""tray.yaml: written with its defaults, read with warnings, corrupt files kept aside, flags win."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

import pytest
import yaml

from ollie_tray import settings
from ollie_tray.main import build_parser, tray_settings
from ollie_tray.settings import DEFAULTS, TraySettings, load, merged, save, settings_path


def _env(tmp_path: Path) -> dict[str, str]:
    return {"HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "cfg")}


def test_the_first_start_writes_every_key_with_its_default(tmp_path: Path) -> None:
    env = _env(tmp_path)
    assert load(env) == DEFAULTS
    path = settings_path(env)
    assert path == tmp_path / "cfg" / "ollie" / "tray.yaml"
    text = path.read_text()
    assert yaml.safe_load(text) == {
        "countdown_s": 60,
        "require_password": False,
        "arm_delay_ms": 700,
        "verbose": False,
    }
    assert sum(line.startswith("#") for line in text.splitlines()) >= 4  # commented
    assert load(env) == DEFAULTS


def test_values_of_the_file_apply(tmp_path: Path) -> None:
    env = _env(tmp_path)
    save(env, TraySettings(countdown_s=30, require_password=True, arm_delay_ms=900))
    assert load(env) == TraySettings(countdown_s=30, require_password=True, arm_delay_ms=900)


def test_a_corrupt_file_is_kept_aside_and_fails_closed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    env = _env(tmp_path)
    path = settings_path(env)
    path.parent.mkdir(parents=True)
    path.write_text("countdown_s: [30\nrequire_password: true\n")
    with caplog.at_level(logging.WARNING):
        got = load(env, now=lambda: 0.0)
    aside = path.with_name("tray.yaml.corrupt-19700101T000000Z")
    assert aside.read_text() == "countdown_s: [30\nrequire_password: true\n"
    assert got.require_password is True  # unknown what the person wanted: the safe side
    assert got.countdown_s == DEFAULTS.countdown_s
    assert str(path) in caplog.text and str(aside) in caplog.text
    assert load(env) == DEFAULTS  # a fresh file with the defaults replaced it


def test_a_file_that_is_no_mapping_is_kept_aside(tmp_path: Path) -> None:
    env = _env(tmp_path)
    path = settings_path(env)
    path.parent.mkdir(parents=True)
    path.write_text("- countdown_s\n")
    assert load(env, now=lambda: 0.0).require_password is True
    assert path.with_name("tray.yaml.corrupt-19700101T000000Z").is_file()


@pytest.mark.parametrize(
    ("field", "value", "expected"),
    [
        ("countdown_s", "30", 60),
        ("countdown_s", 0, 60),
        ("countdown_s", True, 60),  # a bool is no number of seconds
        ("countdown_s", 99999, 60),
        ("arm_delay_ms", 0, 700),  # an Approve button armed at once is refused
        ("require_password", "no", True),  # doubt about the password: it is required
        ("require_password", 1, True),
        ("verbose", "yes", False),
    ],
)
def test_a_wrong_value_is_named_and_its_default_applies(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, field: str, value: object, expected: object
) -> None:
    env = _env(tmp_path)
    path = settings_path(env)
    path.parent.mkdir(parents=True)
    path.write_text(yaml.safe_dump({field: value, "countdown_s": 45} | {field: value}))
    with caplog.at_level(logging.WARNING):
        got = load(env)
    assert getattr(got, field) == expected
    if field != "countdown_s":
        assert got.countdown_s == 45  # the other fields still apply
    assert str(path) in caplog.text and field in caplog.text and repr(value) in caplog.text
    assert path.is_file()  # a wrong value is no corrupt file: it stays


def test_unknown_keys_are_named(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    env = _env(tmp_path)
    path = settings_path(env)
    path.parent.mkdir(parents=True)
    path.write_text("countdown: 30\ncountdown_s: 20\n")
    with caplog.at_level(logging.WARNING):
        assert load(env).countdown_s == 20
    assert "'countdown'" in caplog.text


def test_an_empty_file_means_the_defaults(tmp_path: Path) -> None:
    env = _env(tmp_path)
    settings_path(env).parent.mkdir(parents=True)
    settings_path(env).write_text("# nothing\n")
    assert load(env) == DEFAULTS


def test_the_variable_and_the_flags_win_over_the_file() -> None:
    file = TraySettings(countdown_s=30, require_password=False)
    assert merged(file, {}) == file
    assert merged(file, {}, countdown=10).countdown_s == 10
    assert merged(file, {"OLLIE_TRAY_REQUIRE_PASSWORD": "1"}).require_password is True
    assert merged(file, {}, require_password=True).require_password is True
    assert merged(file, {}, verbose=True).verbose is True
    # A flag cannot lower what the file requires: no flag turns the password off.
    assert merged(TraySettings(require_password=True), {}).require_password is True


def test_the_command_line_reads_the_file_and_overrides_it(tmp_path: Path) -> None:
    env = _env(tmp_path)
    save(env, TraySettings(countdown_s=30, require_password=True))

    def parsed(*argv: str) -> argparse.Namespace:
        return build_parser().parse_args(argv)

    assert tray_settings(env, parsed()) == TraySettings(countdown_s=30, require_password=True)
    assert tray_settings(env, parsed("--countdown", "15")).countdown_s == 15


def test_save_keeps_the_commented_template(tmp_path: Path) -> None:
    env = _env(tmp_path)
    path = save(env, TraySettings(countdown_s=90))
    assert path.read_text() == settings.render(TraySettings(countdown_s=90))
    assert "# Default: 60" in path.read_text()
