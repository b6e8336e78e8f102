"""Remembered action answers: what a pattern covers, and the rule store."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from registry_core.broker.question import Remember
from registry_core.broker.remember.action_rules import ActionRuleStore, covers, program_of
from registry_core.broker.wire.messages import Decision, PatternKind


@pytest.mark.parametrize(
    ("command", "program"),
    [
        ("git status", "git"),
        ("  make   all ", "make"),
        ("git status; rm -rf ~", None),
        ("git status && x", None),
        ("a | b", None),
        ("echo `id`", None),
        ("echo $HOME", None),
        ("cat < /etc/passwd", None),
        ("rm *", None),
        ("FOO=1 make", None),
        ("echo 'a b'", None),
        ("git\nrm -rf /", None),
        ("", None),
        (None, None),
    ],
)
def test_program_of_only_simple_commands(command: str | None, program: str | None) -> None:
    assert program_of(command) == program


def test_path_patterns_cover_the_file_or_beneath_a_directory_never_by_dotdot() -> None:
    def cov(pattern: str, path: str) -> bool:
        return covers(PatternKind.PATH, pattern, summary="s", command=None, path=path)

    assert cov("/p/a.py", "/p/a.py")
    assert not cov("/p/a.py", "/p/a.pyc")
    assert cov("/p/", "/p/sub/x")
    assert not cov("/p/", "/p2/x")
    assert not cov("/p/", "/p/../etc/passwd")
    assert not cov("/p", "/p/x")  # a directory pattern ends with /
    assert not cov("relative/", "/relative/x")


def test_exact_covers_the_whole_command_not_a_shortened_summary() -> None:
    assert covers(PatternKind.EXACT, "a b", summary="a b", command=None, path=None)
    assert not covers(PatternKind.EXACT, "a b", summary="a b", command="a\nb", path=None)


def test_store_remembers_deny_first_and_persists(tmp_path: Path) -> None:
    path = tmp_path / "action-policies.json"
    store = ActionRuleStore(path)
    store.remember("cc", "Bash", PatternKind.PROGRAM, "git", Remember.ALWAYS)
    store.remember("cc", "Bash", PatternKind.EXACT, "git push", Remember.DENY_ALWAYS)
    again = ActionRuleStore(path)
    push = again.lookup("cc", "Bash", summary="git push", command="git push", path=None)
    log = again.lookup("cc", "Bash", summary="git log", command="git log", path=None)
    assert push is not None and push.decision is Decision.DENY
    assert log is not None and log.decision is Decision.ALLOW
    assert again.lookup("other", "Bash", summary="git log", command="git log", path=None) is None


def test_session_and_timed_rules(tmp_path: Path) -> None:
    now = [1000.0]
    store = ActionRuleStore(tmp_path / "r.json", clock=lambda: now[0])
    store.remember("cc", "Bash", PatternKind.PROGRAM, "ls", Remember.SESSION)
    store.remember("cc", "Bash", PatternKind.PROGRAM, "make", Remember.MINUTES_15)
    stored = json.loads((tmp_path / "r.json").read_text())["rules"]
    assert [r["pattern"] for r in stored] == ["make"]
    assert store.lookup("cc", "Bash", summary="ls", command="ls", path=None) is not None
    now[0] += 15 * 60 + 1
    assert store.lookup("cc", "Bash", summary="make", command="make", path=None) is None
    assert (
        ActionRuleStore(tmp_path / "r.json").lookup(
            "cc", "Bash", summary="ls", command="ls", path=None
        )
        is None
    )  # session rules never reach the file


def test_a_corrupt_file_is_kept_aside_and_reported(tmp_path: Path) -> None:
    path = tmp_path / "action-policies.json"
    path.write_text("{not json")
    problems: list[str] = []
    store = ActionRuleStore(path, on_problem=problems.append)
    assert store.rules() == []
    assert problems and "kept aside" in problems[0]
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(path.name + ".corrupt")]
