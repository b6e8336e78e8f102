"""Tests of ``sandbox show`` data and text (registry_core.sandbox.describe)."""

from __future__ import annotations

import json
from pathlib import Path

from registry_core.sandbox.describe import describe, format_text
from registry_core.sandbox.profiles import parse_profile
from registry_core.sandbox.rules import EffectiveRules, effective_rules


def rules_for(tmp_path: Path, network: dict[str, object] | None = None) -> EffectiveRules:
    (tmp_path / "dir").mkdir()
    (tmp_path / "file").write_text("x")
    profile = parse_profile(
        {
            "filesystem": {
                "rw": [str(tmp_path / "dir")],
                "rox": [str(tmp_path / "file"), str(tmp_path / "missing")],
                "ro": ["{UNSET_VARIABLE}/x"],
            },
            "network": network or {"enabled": True, "connect_tcp": [443], "bind_tcp": [8080]},
            "env": ["PATH"],
            "bogus": True,
        },
        name="demo",
        source="/p/demo.yaml",
    )
    return effective_rules(profile, {"HOME": "/h"}, str(tmp_path))


def test_describe_is_json_and_complete(tmp_path: Path) -> None:
    rules = rules_for(tmp_path)
    data = describe(rules, abi=7)
    assert json.loads(json.dumps(data)) == data
    assert data["profile"] == "demo"
    assert data["kernel_abi"] == 7
    assert data["landlock"] is True
    by_path = {entry["path"]: entry for entry in data["filesystem"]}
    directory = by_path[str(tmp_path / "dir")]
    assert directory["access"] == "rw"
    assert directory["kind"] == "dir"
    assert "make_reg" in directory["rights"]
    file = by_path[str(tmp_path / "file")]
    assert file["kind"] == "file"
    assert set(file["rights"]) == {"execute", "read_file"}  # masked to file rights
    assert by_path[str(tmp_path / "missing")]["kind"] == "missing"
    assert data["network"] == {"mode": "restricted", "bind_tcp": [8080], "connect_tcp": [443]}
    assert data["scoped"] == ["abstract_unix_socket", "signal"]
    assert data["env"] == ["PATH"]
    # describe() without a namespace builder: that is the first thing not enforced.
    assert {gap["feature"] for gap in data["unenforced"]} == {"namespaces", "udp", "unix_sockets"}
    assert data["namespaces"]["enforced"] is False
    with_bwrap = describe(rules, abi=7, bwrap="/usr/bin/bwrap", cwd=str(tmp_path))
    assert {gap["feature"] for gap in with_bwrap["unenforced"]} == {"udp", "unix_sockets"}
    assert with_bwrap["namespaces"]["unshared"][:3] == ["user", "mount", "pid"]
    assert {"kind": "rw", "path": str(tmp_path / "dir"), "detail": ""} in with_bwrap["namespaces"][
        "view"
    ]
    assert "Mount view (everything else is absent):" in format_text(with_bwrap)
    assert data["skipped"][0]["path"] == "{UNSET_VARIABLE}/x"
    assert any("profile.bogus" in warning for warning in data["warnings"])
    assert any("UNSET_VARIABLE" in warning for warning in data["warnings"])


def test_describe_old_kernel(tmp_path: Path) -> None:
    data = describe(rules_for(tmp_path), abi=3)
    features = {gap["feature"]: gap for gap in data["unenforced"]}
    assert features["tcp"]["needs_abi"] == 4
    assert features["tcp"]["requested"] is True
    assert data["scoped"] == []


def test_format_text_aligns_columns(tmp_path: Path) -> None:
    text = format_text(describe(rules_for(tmp_path), abi=7))
    lines = text.splitlines()
    assert lines[0].startswith("Profile:")
    assert "Landlock:     ABI 7" in text
    rows = [line for line in lines if str(tmp_path) in line and line.startswith("  r")]
    columns = {line.index(str(tmp_path)) for line in rows}
    assert len(rows) == 3
    assert len(columns) == 1  # the path column is aligned
    assert "connect tcp  443" in text
    assert "bind tcp     8080" in text
    assert "Not enforced:" in text
    assert "Skipped paths:" in text
    assert "Warnings:" in text


def test_format_text_without_landlock(tmp_path: Path) -> None:
    text = format_text(describe(rules_for(tmp_path, {"enabled": False}), abi=0))
    assert "Landlock:     not available" in text
    assert "deny (no TCP bind or connect)" in text
    assert "landlock" in text


def test_describe_names_variables_set_by_the_profile_but_not_their_values(tmp_path: Path) -> None:
    profile = parse_profile(
        {"env": ["PATH", "TOKEN=s3cret"], "advanced": {"ldd": True}}, name="e", source="/p/e.yaml"
    )
    data = describe(effective_rules(profile, {"HOME": str(tmp_path)}, str(tmp_path)), abi=7)
    assert data["env"] == ["PATH"]
    assert data["env_set"] == ["TOKEN"]
    assert data["advanced"] == {"ldd": True, "add_exec": False}
    text = format_text(data)
    assert "TOKEN" in text and "s3cret" not in text
    assert "ldd" in text
