"""The private /tmp's name: six random bytes in hex after ``call-``, a taken name
skipped, and a clear refusal after a hundred taken names (written against the
mutants of ``contain._fresh_dir``)."""

from __future__ import annotations

import errno
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from registry_core.errors import SandboxError
from registry_core.sandbox import contain as contain_module
from registry_core.sandbox.contain import make_private_tmp


def scripted_random(monkeypatch: pytest.MonkeyPatch, values: Iterator[bytes]) -> list[int]:
    """``os.urandom`` in contain answers ``values`` in turn; the sizes asked for."""
    asked: list[int] = []

    def urandom(size: int) -> bytes:
        asked.append(size)
        return next(values)

    monkeypatch.setattr(contain_module.os, "urandom", urandom)
    return asked


def test_a_name_is_call_and_six_random_bytes_in_hex(tmp_path: Path) -> None:
    made = Path(make_private_tmp(tmp_path))
    assert made.parent == tmp_path
    assert re.fullmatch(r"call-[0-9a-f]{12}", made.name)


def test_a_taken_name_is_skipped_for_a_fresh_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "call-000000000000").mkdir()
    asked = scripted_random(monkeypatch, iter([b"\0" * 6, b"\1" * 6]))
    made = make_private_tmp(tmp_path)
    monkeypatch.undo()
    assert made == str(tmp_path / "call-010101010101")
    assert asked == [6, 6]


def test_a_hundred_taken_names_are_refused_in_words(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "call-000000000000").mkdir()
    asked = scripted_random(monkeypatch, iter(lambda: b"\0" * 6, None))
    with pytest.raises(SandboxError) as caught:
        make_private_tmp(tmp_path)
    monkeypatch.undo()
    assert str(caught.value) == (
        f"cannot create the call's private /tmp under {tmp_path}: no unused name for a private /tmp"
    )
    cause = caught.value.__cause__
    assert isinstance(cause, FileExistsError)
    assert (cause.errno, cause.strerror, cause.filename) == (
        errno.EEXIST,
        "no unused name for a private /tmp",
        str(tmp_path),
    )
    assert asked == [6] * 100
    assert [p.name for p in tmp_path.iterdir()] == ["call-000000000000"]
