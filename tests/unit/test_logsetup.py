"""Logging: syslog-priority prefixes only when stderr is the journal stream systemd names."""

from __future__ import annotations

import importlib
import io
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

import pytest

from registry_core.logsetup import PLAIN_FORMAT, is_journal_stream, priority, setup_logging


@pytest.fixture
def stderr_file(tmp_path: Path) -> Iterator[TextIO]:
    with open(tmp_path / "stderr", "w+", encoding="utf-8") as stream:
        yield stream
    root = logging.getLogger()
    for handler in list(root.handlers):
        if getattr(handler, "_ollie_logsetup", False):
            root.removeHandler(handler)
    root.setLevel(logging.WARNING)


def _journal_env(stream: TextIO) -> dict[str, str]:
    st = os.fstat(stream.fileno())
    return {"JOURNAL_STREAM": f"{st.st_dev}:{st.st_ino}"}


def _written(stream: TextIO) -> str:
    stream.flush()
    stream.seek(0)
    return stream.read()


def test_priorities_follow_syslog() -> None:
    assert [priority(x) for x in (50, 40, 30, 20, 10)] == [2, 3, 4, 6, 7]
    assert priority(35) == 4  # a custom level between takes the lower one's
    assert priority(1) == 7


def test_the_journal_stream_is_recognised_by_device_and_inode(
    stderr_file: TextIO, tmp_path: Path
) -> None:
    assert is_journal_stream(stderr_file, _journal_env(stderr_file))
    with open(tmp_path / "other", "w", encoding="utf-8") as other:
        assert not is_journal_stream(stderr_file, _journal_env(other))  # inherited, not ours
    for value in ("", "12", "a:b", "1:2:3", ":"):
        assert not is_journal_stream(stderr_file, {"JOURNAL_STREAM": value})
    assert not is_journal_stream(stderr_file, {})
    assert not is_journal_stream(io.StringIO(), _journal_env(stderr_file))  # no descriptor


def test_under_the_journal_every_line_carries_its_priority(
    stderr_file: TextIO, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("sys.stderr", stderr_file)  # during the call: pytest re-patches it
    setup_logging(verbose=True, env=_journal_env(stderr_file))
    log = logging.getLogger("ollie.test")
    log.debug("not shown")
    log.info("started")
    log.warning("first\nsecond")
    log.error("broken")
    assert _written(stderr_file).splitlines() == [
        "<6>started",
        "<4>first",
        "<4>second",
        "<3>broken",
    ]


def test_elsewhere_stderr_stays_plain(stderr_file: TextIO, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.stderr", stderr_file)  # during the call: pytest re-patches it
    setup_logging(fmt=PLAIN_FORMAT, env={})
    logging.getLogger("ollie.test").info("hidden without verbose")
    logging.getLogger("ollie.test").warning("careful")
    assert _written(stderr_file).splitlines() == ["WARNING:ollie.test:careful"]


def test_setting_up_again_replaces_the_handler(
    stderr_file: TextIO, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("sys.stderr", stderr_file)  # during the call: pytest re-patches it
    setup_logging(env={})
    setup_logging(env=_journal_env(stderr_file))
    logging.getLogger("ollie.test").warning("once")
    assert _written(stderr_file).splitlines() == ["<4>once"]


def test_records_go_to_the_stderr_of_the_moment(
    stderr_file: TextIO, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("sys.stderr", stderr_file)  # during the call: pytest re-patches it
    setup_logging(env={})
    later = io.StringIO()
    monkeypatch.setattr("sys.stderr", later)
    logging.getLogger("ollie.test").warning("here")
    assert later.getvalue() == "here\n"
    assert _written(stderr_file) == ""


@pytest.mark.parametrize("module", ["approve", "askpass", "broker", "elevate", "remote", "tools"])
def test_every_command_line_program_sets_logging_up(
    module: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    program = importlib.import_module(f"registry_core.cli.{module}")
    calls: list[str] = []
    monkeypatch.setattr(program, "setup_logging", lambda **kw: calls.append("setup"))
    monkeypatch.setattr(program, "main", lambda *a: calls.append("main") or 0)
    with pytest.raises(SystemExit):
        program.main_entry()
    assert calls == ["setup", "main"]  # before the program runs
