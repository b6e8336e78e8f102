"""What deploy copies, what it may delete (manifest), and the tar fallback's stream."""

from __future__ import annotations

import io
import json
import os
import tarfile
from pathlib import Path

import pytest

from registry_core.errors import RemoteError
from registry_core.paths import resources_dir
from registry_core.remote.deploy import (
    MANIFEST,
    check_remote_path,
    manifest_text,
    parse_manifest,
    parse_probe,
    remote_tools_script,
    safe_name,
    select_files,
    stale_files,
    tar_stream,
)

EXAMPLES = resources_dir() / "examples" / "tools"


def test_the_demo_tools_and_the_executables_their_cmds_name() -> None:
    files = select_files(EXAMPLES)
    assert "gpu_status.meta" in files
    assert {"gpu_status_nvidia", "gpu_status_macos"} <= set(files)  # named by variant cmds
    assert {"system_logs_journald", "system_logs_syslog"} <= set(files)
    assert {"greet", "greet.meta", "whoami_root"} <= set(files)
    assert "echo_args.meta" in files and "echo_args" not in files
    assert files == sorted(files)


def test_only_meta_files_and_what_they_name(tmp_path: Path) -> None:
    (tmp_path / "a.meta").write_text(json.dumps({"cmd": "helper"}))
    (tmp_path / "a").write_text("#!/bin/sh\n")
    (tmp_path / "helper").write_text("#!/bin/sh\n")
    (tmp_path / "b.meta").write_text(json.dumps({"variants": [{"cmd": "/usr/bin/env"}]}))
    (tmp_path / "notes.txt").write_text("not a tool")
    (tmp_path / "unrelated").write_text("#!/bin/sh\n")
    (tmp_path / "broken.meta").write_text("{not json")
    (tmp_path / ".hidden.meta").write_text("{}")
    (tmp_path / "dir.meta").mkdir()
    (tmp_path / "c.meta").write_text(json.dumps({"cmd": "../escape"}))
    assert select_files(tmp_path) == ["a", "a.meta", "b.meta", "broken.meta", "c.meta", "helper"]
    with pytest.raises(RemoteError):
        select_files(tmp_path / "missing")


def test_manifest_round_trip_and_unsafe_entries() -> None:
    names = ["b", "a.meta", "a"]
    assert parse_manifest(manifest_text(names)) == ["a", "a.meta", "b"]
    tampered = "ok\n../../.bashrc\n/etc/passwd\n.ssh\n..\n\nsub/dir\n" + MANIFEST + "\n"
    assert parse_manifest(tampered) == ["ok"]
    for bad in ("", ".", "..", "a/b", ".x", MANIFEST, "a\nb", "a b"):
        assert not safe_name(bad), bad
    assert safe_name("-rf")  # harmless: removal uses "rm -f -- NAME"


def test_only_names_we_deployed_and_no_longer_deploy_are_stale() -> None:
    previous = ["greet", "greet.meta", "uname", "uname.meta", "../../etc/passwd"]
    current = ["uname", "uname.meta", "new.meta"]
    assert stale_files(previous, current) == ["greet", "greet.meta"]
    assert stale_files([], current) == []  # first deploy: nothing to remove
    assert stale_files(previous, previous) == []


def test_tar_stream_keeps_modes_follows_links_and_has_no_owner(tmp_path: Path) -> None:
    (tmp_path / "tool").write_text("#!/bin/sh\necho hi\n")
    os.chmod(tmp_path / "tool", 0o750)
    (tmp_path / "tool.meta").write_text("{}")
    os.chmod(tmp_path / "tool.meta", 0o640)
    (tmp_path / "link").symlink_to(tmp_path / "tool")
    data = tar_stream(tmp_path, ["link", "tool", "tool.meta"])
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        members = {m.name: m for m in tar.getmembers()}
        assert members["tool"].mode == 0o750
        assert members["tool.meta"].mode == 0o640
        assert members["link"].isfile()  # the file, not the link
        assert {(m.uid, m.gid, m.uname) for m in members.values()} == {(0, 0, "")}
        extracted = tar.extractfile("link")
        assert extracted is not None and extracted.read() == b"#!/bin/sh\necho hi\n"


def test_probe_output_is_parsed() -> None:
    probe = parse_probe(
        "rsync=/usr/bin/rsync\nollie_tools=/home/a/.local/bin/ollie-tools\n"
        "--ollie-manifest--\ngreet\ngreet.meta\n../x\n"
    )
    assert probe.rsync and probe.ollie_tools == "/home/a/.local/bin/ollie-tools"
    assert probe.manifest == ["greet", "greet.meta"]
    empty = parse_probe("rsync=\nollie_tools=\n--ollie-manifest--\n")
    assert (empty.rsync, empty.ollie_tools, empty.manifest) == (False, "", [])


def test_remote_paths_are_plain() -> None:
    for good in ("~/.config/ollie/tools", "/srv/tools", "tools", "~"):
        assert check_remote_path(good) == good
    for bad in ("~bob/tools", "a b", "/x/../y", "$(rm -rf ~)", "", "x;y"):
        with pytest.raises(RemoteError):
            check_remote_path(bad)


def test_remote_ollie_tools_script() -> None:
    script = remote_tools_script("", ["dump", "--json"], "~/t")
    assert "command -v ollie-tools" in script and "$HOME/.local/bin/ollie-tools" in script
    assert 'OLLIE_TOOLS_PATH="$HOME"/t' in script
    assert script.rstrip().endswith('exec "$t" dump --json')
    fixed = remote_tools_script("/opt/o/ollie-tools", ["list"])
    assert "t=/opt/o/ollie-tools" in fixed and "OLLIE_TOOLS_PATH" not in fixed
