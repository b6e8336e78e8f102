"""Tests of ldd output parsing and the resolver (registry_core.sandbox.ldd)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from registry_core.sandbox.ldd import LddResolver, parse_ldd_output

SAMPLE = """\
\tlinux-vdso.so.1 (0x00007ffd2b3f1000)
\tlibtinfo.so.6 => /lib/x86_64-linux-gnu/libtinfo.so.6 (0x00007f3b0a5d0000)
\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f3b0a3ef000)
\tlibgone.so.1 => not found
\t/lib64/ld-linux-x86-64.so.2 (0x00007f3b0a76e000)
"""


def test_parse_ldd_output() -> None:
    result = parse_ldd_output(SAMPLE)
    assert result.libraries == (
        "/lib/x86_64-linux-gnu/libtinfo.so.6",
        "/lib/x86_64-linux-gnu/libc.so.6",
        "/lib64/ld-linux-x86-64.so.2",
    )
    assert result.missing == ("libgone.so.1",)


def test_parse_empty_output() -> None:
    result = parse_ldd_output("")
    assert result.libraries == ()
    assert result.missing == ()


def write_fake_ldd(path: Path, body: str) -> str:
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)
    return str(path)


def test_resolver_runs_ldd_and_caches(tmp_path: Path) -> None:
    counter = tmp_path / "count"
    fake = write_fake_ldd(
        tmp_path / "ldd",
        f"echo x >> {counter}\nprintf '\\tlibc.so.6 => /lib/libc.so.6 (0x1)\\n'",
    )
    target = tmp_path / "exe"
    target.write_text("x")
    resolver = LddResolver(fake)
    assert resolver(str(target)).libraries == ("/lib/libc.so.6",)
    assert resolver(str(target)).libraries == ("/lib/libc.so.6",)
    assert counter.read_text().count("x") == 1


def test_resolver_static_binary_has_no_libraries(tmp_path: Path) -> None:
    fake = write_fake_ldd(tmp_path / "ldd", "echo '\tnot a dynamic executable' >&2; exit 1")
    target = tmp_path / "exe"
    target.write_text("x")
    assert LddResolver(fake)(str(target)).libraries == ()


def test_resolver_failure_raises_oserror(tmp_path: Path) -> None:
    fake = write_fake_ldd(tmp_path / "ldd", "echo broken >&2; exit 3")
    target = tmp_path / "exe"
    target.write_text("x")
    with pytest.raises(OSError, match="status 3"):
        LddResolver(fake)(str(target))


@pytest.mark.skipif(shutil.which("ldd") is None, reason="no ldd on this host")
def test_real_ldd_on_sh() -> None:
    result = LddResolver()("/bin/sh")
    assert any("libc" in library for library in result.libraries)
