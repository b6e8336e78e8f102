"""Reading profile files and installing the default one (registry_core.sandbox.profiles).

Real files in ``tmp_path``: the size limit at its exact edge, a directory and
a FIFO where a profile should be, bytes that are not UTF-8, profile names,
and the default profile's installation (never clobbering, 0700 parents).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from registry_core.errors import ProfileError
from registry_core.sandbox import profiles as profile_module
from registry_core.sandbox.profiles import (
    MAX_PROFILE_BYTES,
    FilesystemSection,
    NetworkMode,
    NetworkSection,
    install_default_profile,
    load_profile,
    load_profile_file,
    parse_profile,
    shipped_default_profile,
)


def env_for(tmp_path: Path) -> dict[str, str]:
    return {"HOME": str(tmp_path / "home"), "XDG_CONFIG_HOME": str(tmp_path / "config")}


def refusal(path: Path) -> str:
    with pytest.raises(ProfileError) as caught:
        load_profile_file(path)
    assert caught.value.path == str(path)
    return caught.value.message


def test_a_profile_of_exactly_the_limit_loads_and_one_byte_more_is_refused(
    tmp_path: Path,
) -> None:
    path = tmp_path / "edge.yaml"
    head = b"env: [PATH]\n"
    path.write_bytes(head + b"#" * (MAX_PROFILE_BYTES - len(head)))
    assert load_profile_file(path).env == ("PATH",)
    path.write_bytes(head + b"#" * (MAX_PROFILE_BYTES - len(head) + 1))
    assert refusal(path) == f"larger than {MAX_PROFILE_BYTES} bytes"
    assert MAX_PROFILE_BYTES == 1024 * 1024


def test_a_huge_sparse_profile_is_refused_by_its_size_without_reading_it(
    tmp_path: Path,
) -> None:
    # 1 TiB of holes: reading it whole would exhaust memory; the size alone refuses it.
    path = tmp_path / "huge.yaml"
    with path.open("wb") as file:
        file.truncate(1 << 40)
    assert refusal(path) == f"larger than {MAX_PROFILE_BYTES} bytes"
    path.write_bytes(b"#" * (MAX_PROFILE_BYTES + 2))  # just over the reader's own limit
    assert refusal(path) == f"larger than {MAX_PROFILE_BYTES} bytes"


def test_a_missing_profile_is_named(tmp_path: Path) -> None:
    assert refusal(tmp_path / "gone.yaml") == "sandbox profile not found"


def test_a_directory_or_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    directory = tmp_path / "dir.yaml"
    directory.mkdir()
    assert refusal(directory) == "cannot read: not a regular file (a directory)"
    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)
    assert refusal(fifo) == "cannot read: not a regular file (a FIFO)"


def test_an_unreadable_profile_names_the_system_error(tmp_path: Path) -> None:
    loop = tmp_path / "loop.yaml"
    loop.symlink_to(loop)
    assert refusal(loop) == f"cannot read: {os.strerror(40)}"  # ELOOP


def test_a_symlinked_profile_is_followed(tmp_path: Path) -> None:
    real = tmp_path / "dotfiles" / "real.yaml"
    real.parent.mkdir()
    real.write_text("env: [LANG]\n")
    link = tmp_path / "strict.yaml"
    link.symlink_to(real)
    profile = load_profile_file(link)
    assert (profile.name, profile.source, profile.env) == ("strict", str(link), ("LANG",))


def test_bytes_that_are_not_utf8_are_refused_by_position(tmp_path: Path) -> None:
    path = tmp_path / "latin.yaml"
    path.write_bytes(b"env: [CAF\xc9]\n")
    assert refusal(path) == (
        "not UTF-8: 'utf-8' codec can't decode byte 0xc9 in position 9: invalid continuation byte"
    )


def test_an_explicit_name_wins_over_the_file_stem(tmp_path: Path) -> None:
    path = tmp_path / "file.yaml"
    path.write_text("")
    assert load_profile_file(path, name="given").name == "given"
    assert load_profile_file(path).name == "file"


def test_only_a_remembered_load_writes_beside_the_profile(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text("env: [PATH]\n")
    load_profile_file(path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.yaml"]
    first = load_profile_file(path, remember=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == [".p.yaml.parsed.json", "p.yaml"]
    assert load_profile_file(path, remember=True) == first


@pytest.mark.parametrize("name", ["a", "A.b-c_9", "_x", "9lives", "x..y"])
def test_profile_names_of_allowed_characters_are_looked_up(tmp_path: Path, name: str) -> None:
    with pytest.raises(ProfileError) as caught:
        load_profile(env_for(tmp_path), name)
    assert caught.value.message == "sandbox profile not found"
    assert caught.value.path == str(tmp_path / "config" / "ollie" / "sandbox" / f"{name}.yaml")


@pytest.mark.parametrize("name", ["-x", ".x", "a b", "a/b", "ä", "a\n", "x*"])
def test_other_profile_names_are_refused_by_name(tmp_path: Path, name: str) -> None:
    with pytest.raises(ProfileError) as caught:
        load_profile(env_for(tmp_path), name)
    assert caught.value.path == name
    assert caught.value.message == "invalid profile name (allowed: A-Z a-z 0-9 _ . -)"


def test_a_named_profile_is_read_from_the_sandbox_directory(tmp_path: Path) -> None:
    directory = tmp_path / "config" / "ollie" / "sandbox"
    directory.mkdir(parents=True)
    (directory / "strict.yaml").write_text("env: [TERM]\n")
    profile = load_profile(env_for(tmp_path), "strict")
    assert (profile.name, profile.env, profile.warnings) == ("strict", ("TERM",), ())
    assert not (directory / "default.yaml").exists()  # only the default is installed
    # The user's configured profiles keep their parse beside them (profile_cache.py).
    assert (directory / ".strict.yaml.parsed.json").is_file()


def test_the_install_note_is_word_for_word(tmp_path: Path) -> None:
    target = tmp_path / "config" / "ollie" / "sandbox" / "default.yaml"
    profile = load_profile(env_for(tmp_path))
    assert profile.warnings == (
        f"the default profile was missing and has been installed at {target} "
        "(ollie-core would refuse to run without it)",
    )
    assert profile.name == "default"


def test_installing_creates_private_parents_and_leaves_no_temporary(tmp_path: Path) -> None:
    target = install_default_profile(env_for(tmp_path))
    assert target == tmp_path / "config" / "ollie" / "sandbox" / "default.yaml"
    assert target.read_bytes() == shipped_default_profile().read_bytes()
    assert stat.S_IMODE(target.parent.stat().st_mode) == 0o700
    assert sorted(p.name for p in target.parent.iterdir()) == ["default.yaml"]


def test_an_entry_that_appears_at_the_target_is_never_replaced(tmp_path: Path) -> None:
    # A dangling symlink is "missing" to the existence check but taken to the
    # link: the path a concurrent installer (or the user) just created.
    env = env_for(tmp_path)
    target = tmp_path / "config" / "ollie" / "sandbox" / "default.yaml"
    target.parent.mkdir(parents=True)
    target.symlink_to(tmp_path / "elsewhere.yaml")
    assert install_default_profile(env) == target
    assert os.readlink(target) == str(tmp_path / "elsewhere.yaml")
    assert not (tmp_path / "elsewhere.yaml").exists()
    assert sorted(p.name for p in target.parent.iterdir()) == ["default.yaml"]


def test_an_install_that_cannot_write_names_the_target(tmp_path: Path) -> None:
    env = env_for(tmp_path)
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "ollie").write_text("a file where a directory should be")
    target = tmp_path / "config" / "ollie" / "sandbox" / "default.yaml"
    with pytest.raises(ProfileError) as caught:
        install_default_profile(env)
    assert caught.value.path == str(target)
    assert caught.value.message.startswith("cannot install the default profile: ")
    assert "Not a directory" in caught.value.message


def test_an_installation_without_its_default_profile_names_the_missing_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    missing = tmp_path / "resources" / "sandbox" / "default.yaml"
    monkeypatch.setattr(profile_module, "shipped_default_profile", lambda: missing)
    with pytest.raises(ProfileError) as caught:
        install_default_profile(env_for(tmp_path))
    assert caught.value.path == str(missing)
    assert caught.value.message == (
        f"shipped default profile unreadable: [Errno 2] No such file or directory: '{missing}'"
    )
    assert not (tmp_path / "config" / "ollie" / "sandbox" / "default.yaml").exists()


def test_the_shipped_default_lives_in_resources() -> None:
    path = shipped_default_profile()
    assert path.parts[-2:] == ("sandbox", "default.yaml")
    assert path.parent.parent.name == "resources"
    assert path.is_file()


def test_entries_go_section_by_section_in_file_order() -> None:
    section = FilesystemSection(ro=("/a", "/b"), rox=("/c",), rw=(), rwx=("/d", "/e"))
    assert [(p, a.value) for p, a in section.entries()] == [
        ("/a", "ro"),
        ("/b", "ro"),
        ("/c", "rox"),
        ("/d", "rwx"),
        ("/e", "rwx"),
    ]


@pytest.mark.parametrize(
    ("enabled", "unrestricted", "mode"),
    [
        (False, False, NetworkMode.DENY),
        (False, True, NetworkMode.DENY),
        (True, False, NetworkMode.RESTRICTED),
        (True, True, NetworkMode.UNRESTRICTED),
    ],
)
def test_the_network_mode_table(enabled: bool, unrestricted: bool, mode: NetworkMode) -> None:
    assert NetworkSection(enabled=enabled, unrestricted=unrestricted).mode is mode
    assert NetworkSection().mode is NetworkMode.DENY


def test_parse_profile_names_the_source() -> None:
    with pytest.raises(ProfileError) as caught:
        parse_profile({"env": "PATH"}, name="n", source="/p/n.yaml")
    assert caught.value.path == "/p/n.yaml"
