"""Tests of ldd output parsing and the resolver (registry_core.sandbox.ldd)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from registry_core.sandbox.ldd import LddResolver, LddResult, parse_ldd_output
from registry_core.trusted import find_trusted

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


@pytest.mark.skipif(find_trusted("ldd") is None, reason="no trusted ldd on this host")
def test_real_ldd_on_sh() -> None:
    result = LddResolver()("/bin/sh")
    assert any("libc" in library for library in result.libraries)


@pytest.mark.skipif(find_trusted("ldd") is None, reason="no trusted ldd on this host")
def test_an_ldd_first_on_path_is_never_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    marker = tmp_path / "planted-ran"
    (tmp_path / "bin").mkdir()
    write_fake_ldd(tmp_path / "bin" / "ldd", f"touch {marker}")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:/usr/bin:/bin")
    result = LddResolver()("/bin/sh")
    assert not marker.exists()
    assert any("libc" in library for library in result.libraries)


def test_parse_keeps_each_library_once_and_only_absolute_paths() -> None:
    text = (
        "  libc.so.6 =>   /lib/libc.so.6   (0x1)\n"
        "libc.so.6 => /lib/libc.so.6 (0x2)\n"
        "libm.so.6 => /lib/libm.so.6\n"
        "librel.so => librel.so (0x3)\n"
        "  libnone.so.2   =>   not found  \n"
        "/lib64/ld-linux-x86-64.so.2\n"
        "statically linked\n"
    )
    result = parse_ldd_output(text)
    assert result.libraries == ("/lib/libc.so.6", "/lib/libm.so.6", "/lib64/ld-linux-x86-64.so.2")
    assert result.missing == ("libnone.so.2",)


def test_a_changed_executable_is_asked_about_again(tmp_path: Path) -> None:
    counter = tmp_path / "count"
    fake = write_fake_ldd(
        tmp_path / "ldd", f"echo x >> {counter}\nprintf '\\tlibc.so.6 => /lib/libc.so.6 (0x1)\\n'"
    )
    target = tmp_path / "exe"
    target.write_text("x")
    resolver = LddResolver(fake)
    resolver(str(target))
    target.write_text("xy")  # another size
    resolver(str(target))
    info = target.stat()
    os.utime(target, ns=(info.st_atime_ns, info.st_mtime_ns + 1_000_000_000))  # another mtime
    resolver(str(target))
    other = tmp_path / "other"
    other.write_text("xy")
    os.utime(other, ns=(info.st_atime_ns, info.st_mtime_ns + 1_000_000_000))
    resolver(str(other))  # another path, same size and mtime
    assert counter.read_text() == "x\n" * 4


def test_ldd_runs_with_a_fixed_environment_and_the_executable_as_argument(
    tmp_path: Path,
) -> None:
    fake = write_fake_ldd(tmp_path / "ldd", 'env | sort >&2; echo "$#:$1" >&2; exit 2')
    target = tmp_path / "exe"
    target.write_text("x")
    with pytest.raises(OSError, match=r"^ldd exited with status 2: ") as info:
        LddResolver(fake)(str(target))
    lines = str(info.value).removeprefix("ldd exited with status 2: ").splitlines()
    assert [line for line in lines if line.startswith(("PATH=", "LC_ALL=", "HOME="))] == [
        "LC_ALL=C",
        "PATH=/usr/bin:/bin",
    ]
    assert lines[-1] == f"1:{target}"


def test_a_failure_message_is_cut_at_200_characters(tmp_path: Path) -> None:
    fake = write_fake_ldd(tmp_path / "ldd", "printf '  %0300d  ' 0; exit 3")
    target = tmp_path / "exe"
    target.write_text("x")
    with pytest.raises(OSError, match=r"^ldd exited") as info:
        LddResolver(fake)(str(target))
    assert str(info.value) == "ldd exited with status 3: " + "0" * 200


@pytest.mark.parametrize(
    "body",
    [
        "echo '\tnot a dynamic executable' >&2; exit 1",
        "echo '\tstatically linked'",
        "echo '\tstatically linked'; echo '/lib/x.so (0x1)'; exit 1",
    ],
)
def test_a_static_executable_has_no_libraries_and_is_remembered(tmp_path: Path, body: str) -> None:
    counter = tmp_path / "count"
    fake = write_fake_ldd(tmp_path / "ldd", f"echo x >> {counter}\n{body}")
    target = tmp_path / "exe"
    target.write_text("x")
    resolver = LddResolver(fake)
    assert resolver(str(target)) == LddResult()
    assert resolver(str(target)) == LddResult()
    assert counter.read_text() == "x\n"


def test_a_hung_ldd_is_an_error_word_for_word(tmp_path: Path) -> None:
    fake = write_fake_ldd(tmp_path / "ldd", "exec sleep 60")
    target = tmp_path / "exe"
    target.write_text("x")
    with pytest.raises(OSError, match=r"^ldd timed out") as info:
        LddResolver(fake)(str(target))
    assert str(info.value) == "ldd timed out after 10 s"
    assert isinstance(info.value.__cause__, subprocess.TimeoutExpired)


def test_a_library_path_holding_spaces_or_parentheses_is_kept_whole() -> None:
    # Only the trailing " (0x...)" is ldd's load address: a path that holds " ("
    # must not be cut to a shorter path (which would grant a different directory).
    text = (
        "\tlibx.so => /opt/my libs/libx.so (0x00007f0000001000)\n"
        "\tliby.so => /opt/a (b)/liby.so (0x00007f0000002000)\n"
        "\t/opt/c (d)/ld.so (0x00007f0000003000)\n"
        "\tlibz.so => /opt/e (f)/libz.so\n"
    )
    assert parse_ldd_output(text).libraries == (
        "/opt/my libs/libx.so",
        "/opt/a (b)/liby.so",
        "/opt/c (d)/ld.so",
        "/opt/e (f)/libz.so",
    )


def test_only_the_last_load_address_is_cut_and_only_one_ending_the_line() -> None:
    # A path may itself hold " (0x" or "=>", and a path without a load address may
    # end in ")": each is kept whole.
    text = (
        "\tliba.so => /opt/x (0x1)/liba.so (0x00007f0000001000)\n"
        "\tlibb.so => /opt/y=>z/libb.so (0x00007f0000002000)\n"
        "\tlibc.so => /opt/lib (c)\n"
        "\t/opt/odd (0x2\n"
    )
    assert parse_ldd_output(text).libraries == (
        "/opt/x (0x1)/liba.so",
        "/opt/y=>z/libb.so",
        "/opt/lib (c)",
        "/opt/odd (0x2",
    )
