"""The policies file's format and messages, word for word (found by ``make mutate``).

A person edits ``policies.yaml`` by hand: every refusal names the field and
the value, and the file is written the same readable way every time.
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from policy_helpers import EXE, HOST, SHA, T0, FakeClock, entry

from registry_core.broker.question import Remember
from registry_core.broker.remember import policy_file
from registry_core.broker.remember.policies import PolicyStore
from registry_core.broker.remember.policy_file import (
    DocumentError,
    EntryError,
    Policy,
    check_times,
    iso_time,
    move_aside,
    parse_document,
    parse_entry,
    parse_time,
    render_document,
    write_atomic,
)
from registry_core.broker.wire.messages import Decision, Kind
from registry_core.errors import PolicyError

MISSING_CREATED = {k: v for k, v in entry().items() if k != "created"}


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (entry(host="lap\ntop"), "field 'host': must be a non-empty host name"),
        (entry(host=""), "field 'host': must be a non-empty string, got str (quote it)"),
        (entry(remember="once"), "field 'remember': 'once' is never remembered"),
        (entry(remember="deny_always"), "field 'remember': deny_always needs decision deny"),
        (
            entry(decision="deny", remember="always"),
            "field 'remember': a deny is remembered as deny_always",
        ),
        (
            entry(executable=None),
            "field 'executable': an allow needs the executable's absolute path",
        ),
        (
            entry(executable="greet"),
            "field 'executable': an allow needs the executable's absolute path",
        ),
        (
            entry(sha256="xyz"),
            "field 'sha256': an allow needs the executable's sha256 (64 hex digits)",
        ),
        (entry(remember="1h"), "field 'expires': a 1h allow needs an expiry time"),
        ([1], "must be a mapping, got list"),
        (None, "must be a mapping, got null"),
        (entry(tool=5), "field 'tool': must be a non-empty string, got int (quote it)"),
        (entry(tool=None), "field 'tool': must be a non-empty string, got null"),
        (entry(kind="bogus"), "field 'kind': 'bogus' is not one of sandbox, sudo"),
        (
            entry(remember="session"),
            "field 'remember': session policies are never stored in the file",
        ),
        ({**entry(), "expiry": None}, "field 'expiry': unknown key"),
        (MISSING_CREATED, "field 'created': missing"),
        (entry(created="yesterday"), "field 'created': not an ISO-8601 date and time: 'yesterday'"),
        (entry(created=5), "field 'created': must be an ISO-8601 date and time, got int"),
        (entry(created=None), "field 'created': must be an ISO-8601 date and time, got null"),
    ],
)
def test_each_bad_entry_names_its_field_and_value(raw: Any, message: str) -> None:
    with pytest.raises(EntryError) as refused:
        parse_entry(raw)
    assert str(refused.value) == message


def test_times_without_an_offset_are_utc_and_the_epoch_is_kept() -> None:
    assert parse_time("2025-06-15T15:06:40") == T0
    assert parse_entry(entry(created="1970-01-01T00:00:00Z")).created == 0.0


def test_created_up_to_the_clock_skew_ahead_is_accepted() -> None:
    check_times(parse_entry(entry(created=iso_time(T0 + 60))), T0)
    with pytest.raises(EntryError) as refused:
        check_times(parse_entry(entry(created=iso_time(T0 + 61))), T0)
    assert str(refused.value) == "field 'created': 2025-06-15T15:07:41Z is in the future"


def test_describe_names_the_executable_and_a_short_hash() -> None:
    policy = parse_entry(entry())
    assert policy.describe() == (
        "allow greet (sandbox) on laptop, always for /opt/tools/greet (sha256 aaaaaaaaaaaa)"
    )


def test_an_allow_without_a_hash_is_not_remembered_and_says_so(tmp_path: Path) -> None:
    store = PolicyStore(tmp_path / "policies.yaml", clock=FakeClock())
    assert store.remember("greet", Kind.SANDBOX, HOST, Remember.ALWAYS, EXE, None) is None
    assert store.problems == [
        "not remembered (allow greet (sandbox) on laptop, always for /opt/tools/greet "
        "(sha256 )): field 'sha256': an allow needs the executable's sha256 (64 hex digits)"
    ]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"- a\n", "the top level must be a mapping, got list"),
        (b"policies: {}\n", "'policies' must be a list, got dict"),
        (b"rejected: x\n", "'rejected' must be a list, got str"),
        (
            b"[1",
            'not valid YAML: while parsing a flow sequence in "<byte string>", line 1, '
            "column 1 did not find expected ',' or ']' in \"<byte string>\", line 2, column 1",
        ),
    ],
)
def test_an_unusable_document_says_why(data: bytes, message: str) -> None:
    with pytest.raises(DocumentError) as refused:
        parse_document(data, Path("/x/policies.yaml"), T0)
    assert str(refused.value) == message


def test_a_document_without_policies_is_empty() -> None:
    doc = parse_document(b"version: 1\n", Path("/x/policies.yaml"), T0)
    assert (doc.policies, doc.rejected, doc.problems) == ((), (), ())


def test_a_skipped_entry_is_reported_and_recorded_for_the_next_write() -> None:
    raw = entry(remember="once")
    data = render_document([], [], {"policies": [raw]}).encode()
    doc = parse_document(data, Path("/x/policies.yaml"), T0)
    assert doc.problems == (
        "/x/policies.yaml: policies[0]: field 'remember': 'once' is never remembered; "
        "entry skipped (moved under 'rejected:' at the next write)",
    )
    assert doc.rejected == (
        {
            "problem": "field 'remember': 'once' is never remembered",
            "rejected": iso_time(T0),
            "entry": raw,
        },
    )


def test_an_untrusted_documents_allow_is_rejected_with_the_reason_given() -> None:
    data = render_document([parse_entry(entry())], [], None).encode()
    path = Path("/x/policies.yaml")
    doc = parse_document(data, path, T0, trusted=False)
    assert doc.policies == ()
    assert doc.rejected == (
        {
            "problem": "the file was not trusted; allow not applied",
            "rejected": iso_time(T0),
            "entry": entry(),
        },
    )
    why = parse_document(data, path, T0, trusted=False, distrust="owned by uid 7").rejected
    assert why[0]["problem"] == "the file was owned by uid 7; allow not applied"


def test_the_file_is_written_in_a_readable_block_style_in_field_order() -> None:
    policy = Policy(host="büro", **_fields())  # written as is, not escaped
    assert render_document([policy], [], None) == (
        "# Ollie remembered elevation policies: see docs/security.md for the format.\n"
        "# Written by ollie-tray / ollie-tools policy; hand edits are picked up live.\n"
        "version: 1\n"
        "policies:\n"
        "- tool: greet\n"
        "  kind: sandbox\n"
        "  host: büro\n"
        "  decision: allow\n"
        "  remember: always\n"
        "  created: '2025-06-15T15:06:40Z'\n"
        "  expires: null\n"
        "  executable: /opt/tools/greet\n"
        f"  sha256: {SHA}\n"
    )


def _fields() -> dict[str, Any]:
    return {
        "tool": "greet",
        "kind": Kind.SANDBOX,
        "decision": Decision.ALLOW,
        "remember": Remember.ALWAYS,
        "created": T0,
        "expires": None,
        "executable": EXE,
        "sha256": SHA,
    }


# --- writing and moving aside -------------------------------------------------------


def test_write_atomic_creates_private_directories_and_a_hidden_temporary_beside_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "a" / "b" / "policies.yaml"
    renames: list[tuple[str, str]] = []
    real_replace = os.replace

    def spy(src: Any, dst: Any) -> None:
        renames.append((os.fspath(src), os.fspath(dst)))
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", spy)
    write_atomic(path, "version: 1\n")
    assert path.read_text() == "version: 1\n"
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    [(src, dst)] = renames
    assert dst == str(path)
    assert Path(src).parent == path.parent
    assert Path(src).name.startswith(".policies.yaml.")
    assert Path(src).name.endswith(".tmp")


def test_write_atomic_failures_name_the_file_and_leave_nothing_behind(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(PolicyError) as refused:
        write_atomic(blocker / "policies.yaml", "x")
    assert str(refused.value) == f"cannot write {blocker / 'policies.yaml'}: File exists"
    target = tmp_path / "dir" / "policies.yaml"
    (target / "inside").mkdir(parents=True)  # a non-empty directory where the file goes
    with pytest.raises(PolicyError) as replaced:
        write_atomic(target, "x")
    assert str(replaced.value) == f"cannot write {target}: Is a directory"
    assert sorted(p.name for p in target.parent.iterdir()) == ["policies.yaml"]


@pytest.fixture
def tokyo(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("TZ", "Asia/Tokyo")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def test_corrupt_copies_are_named_in_utc_whatever_the_time_zone(
    tmp_path: Path, tokyo: None
) -> None:
    path = tmp_path / "policies.yaml"
    path.write_text("[")
    assert move_aside(path, T0).name == "policies.yaml.corrupt-20250615T150640"


def test_without_hard_links_the_file_is_renamed_never_over_a_copy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_links(src: Any, dst: Any) -> None:
        raise PermissionError(1, "Operation not permitted")  # e.g. vfat

    monkeypatch.setattr(policy_file.os, "link", no_links)
    path = tmp_path / "policies.yaml"
    first = tmp_path / "policies.yaml.corrupt-20250615T150640"
    first.write_text("older copy\n")
    path.write_text("[\n")
    target = move_aside(path, T0)
    assert target == tmp_path / "policies.yaml.corrupt-20250615T150640-2"
    assert target.read_text() == "[\n"
    assert first.read_text() == "older copy\n"
    assert not path.exists()


def test_without_libyaml_deep_nesting_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    # The pure-Python loader (no libyaml installed) recurses instead of limiting depth.
    monkeypatch.setattr(policy_file, "_Loader", yaml.SafeLoader)
    with pytest.raises(DocumentError) as refused:
        parse_document(b"[" * 5000, Path("/x/policies.yaml"), T0)
    assert str(refused.value) == "not valid YAML: nested too deeply"


def test_times_without_an_offset_are_utc_in_any_time_zone(tokyo: None) -> None:
    assert parse_time("2025-06-15T15:06:40") == T0
