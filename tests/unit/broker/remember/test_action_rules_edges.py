"""Remembered action rules at their edges: what each pattern kind covers, the rule
file's exact text, every refusal of a bad file word for word, expiry to the second,
forget/revoke by field, and the cross-process lock (real files, real threads)."""

from __future__ import annotations

import fcntl
import json
import locale
import logging
import os
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from registry_core.broker.question import ActionDetails, Remember
from registry_core.broker.remember.action_rules import (
    ActionRule,
    ActionRuleStore,
    covers,
    program_of,
    shown_action_covered,
)
from registry_core.broker.wire.messages import Decision, PatternKind


def cov_path(pattern: str, path: str | None) -> bool:
    return covers(PatternKind.PATH, pattern, summary="s", command=None, path=path)


def lookup(store: ActionRuleStore, command: str, agent: str = "cc") -> ActionRule | None:
    return store.lookup(agent, "Bash", summary=command, command=command, path=None)


def test_program_of_blank_words_and_assignments() -> None:
    assert program_of("   ") is None
    assert program_of("make FOO=1") == "make"  # an assignment after the program is an argument


def test_a_program_pattern_covers_only_its_own_program() -> None:
    def cov(pattern: str, command: str | None) -> bool:
        return covers(PatternKind.PROGRAM, pattern, summary="x", command=command, path=None)

    assert cov("git", "git log -1")
    assert not cov("git", "make all")
    assert not cov("git", None)
    assert not cov("", "git")


def test_path_patterns_without_a_path_and_at_the_root() -> None:
    assert not cov_path("/p/", None)
    assert not cov_path("/p/a", None)
    assert cov_path("/", "/etc/passwd")
    assert not cov_path("/p/", "/p")  # the directory itself is not beneath it
    assert not cov_path("/p/", "/p/")


def test_path_patterns_are_normalised_and_paths_must_be_normal() -> None:
    assert cov_path("/p/./a.py", "/p/a.py")
    # x may be a symbolic link: x/.. is then not /p (a path is never tidied lexically).
    assert not cov_path("/p/a.py", "/p/x/../a.py")
    assert cov_path("/p/x/../", "/p/y")
    assert cov_path("/p//", "/p/y")
    assert not cov_path("/p/x/../", "/p/x/../../etc")
    assert not cov_path("/srv/X/", "/srv/Y/z")  # a name ending in X: only beneath it
    assert cov_path("/srv/X/", "/srv/X/z")


def test_exact_without_a_command_is_the_summary() -> None:
    assert covers(PatternKind.EXACT, "https://x", summary="https://x", command=None, path=None)
    assert not covers(PatternKind.EXACT, "https://y", summary="https://x", command=None, path="/y")
    assert covers(PatternKind.EXACT, "ls -l", summary="ls", command="ls -l", path=None)


def details(kind: PatternKind, *, command: str | None, path: str | None) -> ActionDetails:
    return ActionDetails(
        agent="cc",
        tool="Edit",
        summary="the summary",
        detail=None,
        display=None,
        command=command,
        path=path,
        pattern_kind=kind,
        pattern="unused",
    )


def test_shown_action_covered_reads_each_field_of_the_action() -> None:
    assert shown_action_covered(details(PatternKind.EXACT, command=None, path=None), "the summary")
    assert shown_action_covered(details(PatternKind.EXACT, command="ls", path=None), "ls")
    assert not shown_action_covered(
        details(PatternKind.EXACT, command="ls", path=None), "the summary"
    )
    assert shown_action_covered(details(PatternKind.PROGRAM, command="ls -a", path=None), "ls")
    assert shown_action_covered(details(PatternKind.PATH, command=None, path="/p/a"), "/p/")
    assert not shown_action_covered(details(PatternKind.PATH, command=None, path="/q/a"), "/p/")


def rule(**changes: object) -> ActionRule:
    fields: dict[str, object] = {
        "agent": "cc",
        "tool": "Bash",
        "kind": PatternKind.PROGRAM,
        "pattern": "git",
        "decision": Decision.ALLOW,
        "remember": Remember.ALWAYS,
        "created": 1000.0,
    }
    fields.update(changes)
    return ActionRule(**fields)  # type: ignore[arg-type]


def test_describe_in_words() -> None:
    assert rule().describe() == "allow cc Bash program 'git'"
    assert (
        rule(decision=Decision.DENY, kind=PatternKind.PATH, pattern="/p/").describe()
        == "deny cc Bash path '/p/'"
    )


def test_to_json_and_back() -> None:
    r = rule(expires=1900.0)
    assert r.to_json() == {
        "agent": "cc",
        "tool": "Bash",
        "kind": "program",
        "pattern": "git",
        "decision": "allow",
        "remember": "always",
        "created": 1000.0,
        "expires": 1900.0,
    }
    assert ActionRule.from_json(r.to_json()) == r
    assert ActionRule.from_json(rule().to_json()) == rule()


def test_from_json_defaults_and_numbers() -> None:
    obj = rule().to_json()
    del obj["created"]
    obj["expires"] = 5
    read = ActionRule.from_json(obj)
    assert read.created == 0.0
    assert read.expires == 5.0 and isinstance(read.expires, float)


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        ([], "a rule must be an object, got list"),
        ("x", "a rule must be an object, got str"),
        ({"tool": "Bash", "pattern": "git"}, "rule field 'agent' must be a string"),
        ({"agent": "cc", "tool": 1, "pattern": "git"}, "rule field 'tool' must be a string"),
        ({"agent": "cc", "tool": "Bash"}, "rule field 'pattern' must be a string"),
        (
            {"agent": "cc", "tool": "Bash", "pattern": "git", "expires": "soon"},
            "rule field 'expires' must be a number or null",
        ),
        (
            {"agent": "cc", "tool": "Bash", "pattern": "git", "kind": "glob"},
            "'glob' is not a valid PatternKind",
        ),
    ],
)
def test_from_json_refusals_word_for_word(obj: object, message: str) -> None:
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        ActionRule.from_json(obj)


def test_the_rule_file_text_and_its_directory(tmp_path: Path) -> None:
    path = tmp_path / "conf" / "ollie" / "action-policies.json"
    store = ActionRuleStore(path, clock=lambda: 1000.9)
    stored = store.remember("cc", "Bash", PatternKind.EXACT, "ls ü", Remember.HOUR)
    assert stored == rule(
        kind=PatternKind.EXACT, pattern="ls ü", remember=Remember.HOUR, expires=4600.0
    )
    expected = {
        "version": 1,
        "rules": [
            {
                "agent": "cc",
                "tool": "Bash",
                "kind": "exact",
                "pattern": "ls ü",
                "decision": "allow",
                "remember": "1h",
                "created": 1000.0,
                "expires": 4600.0,
            }
        ],
    }
    assert (
        path.read_text(encoding="utf-8")
        == json.dumps(expected, indent=2, ensure_ascii=False) + "\n"
    )
    assert (path.parent.stat().st_mode & 0o777) == 0o700
    lock = Path(str(path) + ".lock")
    assert (lock.stat().st_mode & 0o777) == 0o600


def test_remember_once_stores_nothing_and_deny_always_denies(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    store = ActionRuleStore(path, clock=lambda: 50.0)
    assert store.remember("cc", "Bash", PatternKind.PROGRAM, "git", Remember.ONCE) is None
    assert not path.exists() and store.rules() == []
    deny = store.remember("cc", "Bash", PatternKind.PROGRAM, "git", Remember.DENY_ALWAYS)
    assert deny == rule(decision=Decision.DENY, remember=Remember.DENY_ALWAYS, created=50.0)
    allow = store.remember("cc", "Bash", PatternKind.PROGRAM, "git", Remember.ALWAYS)
    assert allow == rule(created=50.0)
    assert store.rules() == [allow]  # the same key replaced, in memory and on disk
    assert ActionRuleStore(path).rules() == [allow]
    minutes = store.remember("cc", "Bash", PatternKind.PROGRAM, "make", Remember.MINUTES_15)
    assert minutes is not None and minutes.expires == 950.0


def test_a_session_rule_is_replaced_by_a_stored_one_of_the_same_key(tmp_path: Path) -> None:
    store = ActionRuleStore(tmp_path / "r.json", clock=lambda: 7.0)
    store.remember("cc", "Bash", PatternKind.PROGRAM, "git", Remember.SESSION)
    kept = store.remember("cc", "Bash", PatternKind.PROGRAM, "git", Remember.DENY_ALWAYS)
    assert store.rules() == [kept]


def test_rules_lists_session_rules_first_and_expires_at_the_instant(tmp_path: Path) -> None:
    now = [100.0]
    store = ActionRuleStore(tmp_path / "r.json", clock=lambda: now[0])
    timed = store.remember("cc", "Bash", PatternKind.PROGRAM, "make", Remember.MINUTES_15)
    session = store.remember("cc", "Bash", PatternKind.PROGRAM, "ls", Remember.SESSION)
    assert store.rules() == [session, timed]
    now[0] = 100.0 + 15 * 60 - 0.5
    assert store.rules() == [session, timed]
    now[0] = 100.0 + 15 * 60
    assert store.rules() == [session]


def test_the_default_clock_is_the_wall_clock(tmp_path: Path) -> None:
    store = ActionRuleStore(tmp_path / "r.json")
    before = time.time()
    stored = store.remember("cc", "Bash", PatternKind.PROGRAM, "git", Remember.HOUR)
    assert stored is not None
    assert int(before) - 1 <= stored.created <= time.time()
    assert store.rules() == [stored]


def test_lookup_skips_other_agents_tools_and_patterns_and_prefers_a_deny(tmp_path: Path) -> None:
    store = ActionRuleStore(tmp_path / "r.json", clock=lambda: 1.0)
    store.remember("other", "Bash", PatternKind.PROGRAM, "git", Remember.DENY_ALWAYS)
    store.remember("cc", "Edit", PatternKind.PROGRAM, "git", Remember.DENY_ALWAYS)
    store.remember("cc", "Bash", PatternKind.PROGRAM, "make", Remember.DENY_ALWAYS)
    first = store.remember("cc", "Bash", PatternKind.PROGRAM, "git", Remember.SESSION)
    store.remember("cc", "Bash", PatternKind.EXACT, "git log", Remember.ALWAYS)
    assert lookup(store, "git log") == first  # the first allow that covers it
    deny = store.remember("cc", "Bash", PatternKind.EXACT, "git log", Remember.DENY_ALWAYS)
    assert lookup(store, "git log") == deny
    assert lookup(store, "git status") == first
    assert lookup(store, "cargo build") is None
    url = store.remember("cc", "Bash", PatternKind.EXACT, "https://x", Remember.ALWAYS)
    assert store.lookup("cc", "Bash", summary="https://x", command=None, path=None) == url
    path_rule = store.remember("cc", "Bash", PatternKind.PATH, "/p/", Remember.ALWAYS)
    found = store.lookup("cc", "Bash", summary="edit", command=None, path="/p/a")
    assert found == path_rule


def test_a_change_by_another_store_is_read_again(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    one, two = ActionRuleStore(path, clock=lambda: 1.0), ActionRuleStore(path, clock=lambda: 1.0)
    assert one.rules() == []
    added = two.remember("cc", "Bash", PatternKind.PROGRAM, "git", Remember.ALWAYS)
    assert one.rules() == [added]
    path.unlink()
    assert one.rules() == []


def same_stamp_rewrite(path: Path, text: str) -> None:
    """Rewrite ``path`` in place with text of the same size, keeping its mtime and inode."""
    st = path.stat()
    assert len(text.encode()) == st.st_size
    path.write_text(text, encoding="utf-8")
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def test_an_unchanged_stamp_is_not_read_again_but_forget_reads_it(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    store = ActionRuleStore(path, clock=lambda: 1.0)
    store.remember("cc", "Bash", PatternKind.PROGRAM, "gitx", Remember.ALWAYS)
    same_stamp_rewrite(path, path.read_text().replace('"gitx"', '"make"'))
    assert [r.pattern for r in store.rules()] == ["gitx"]  # the stamp taken when it saved
    dropped = store.forget(pattern="make")
    assert [r.pattern for r in dropped] == ["make"]
    assert store.rules() == []


def test_revoke_reads_the_file_again_first(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    store = ActionRuleStore(path, clock=lambda: 1.0)
    store.remember("cc", "Bash", PatternKind.PROGRAM, "gitx", Remember.ALWAYS)
    same_stamp_rewrite(path, path.read_text().replace('"gitx"', '"make"'))
    assert store.revoke([rule(pattern="make", created=1.0)]) == [rule(pattern="make", created=1.0)]
    assert json.loads(path.read_text())["rules"] == []


def three_rules(tmp_path: Path) -> ActionRuleStore:
    store = ActionRuleStore(tmp_path / "r.json", clock=lambda: 1.0)
    store.remember("cc", "Bash", PatternKind.PROGRAM, "git", Remember.ALWAYS)
    store.remember("cc", "Edit", PatternKind.PATH, "/p/", Remember.ALWAYS)
    store.remember("gem", "Bash", PatternKind.PROGRAM, "git", Remember.SESSION)
    return store


def names(rules: list[ActionRule]) -> list[tuple[str, str, str]]:
    return [(r.agent, r.tool, r.pattern) for r in rules]


def stored_names(store: ActionRuleStore) -> list[tuple[str, str, str]]:
    doc = json.loads(store.path.read_text())
    return [(r["agent"], r["tool"], r["pattern"]) for r in doc["rules"]]


@pytest.mark.parametrize(
    ("given", "dropped", "left_in_file"),
    [
        ({"agent": "cc"}, [("cc", "Bash", "git"), ("cc", "Edit", "/p/")], []),
        (
            {"tool": "Bash"},
            [("cc", "Bash", "git"), ("gem", "Bash", "git")],
            [("cc", "Edit", "/p/")],
        ),
        ({"pattern": "/p/"}, [("cc", "Edit", "/p/")], [("cc", "Bash", "git")]),
        (
            {"agent": "gem", "pattern": "git"},
            [("gem", "Bash", "git")],
            [("cc", "Bash", "git"), ("cc", "Edit", "/p/")],
        ),
        ({"agent": "cc", "tool": "Nope"}, [], [("cc", "Bash", "git"), ("cc", "Edit", "/p/")]),
        ({}, [("cc", "Bash", "git"), ("cc", "Edit", "/p/"), ("gem", "Bash", "git")], []),
    ],
)
def test_forget_drops_what_matches_every_given_field(
    tmp_path: Path,
    given: dict[str, str],
    dropped: list[tuple[str, str, str]],
    left_in_file: list[tuple[str, str, str]],
) -> None:
    store = three_rules(tmp_path)
    assert names(store.forget(**given)) == dropped
    assert stored_names(store) == left_in_file
    assert names(store.rules()) == [n for n in names(three_rules_list()) if n not in dropped]


def three_rules_list() -> list[ActionRule]:
    return [
        rule(agent="gem", remember=Remember.SESSION),
        rule(),
        rule(tool="Edit", kind=PatternKind.PATH, pattern="/p/"),
    ]


def test_forget_and_revoke_without_a_match_write_nothing(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    store = ActionRuleStore(path)
    assert store.forget(agent="cc") == []
    assert store.revoke([rule()]) == []
    assert not path.exists()


def test_revoke_drops_exactly_the_given_rules_by_key(tmp_path: Path) -> None:
    store = three_rules(tmp_path)
    gone = store.revoke(
        [
            rule(created=99.0, decision=Decision.DENY),  # the key decides, not the rest
            rule(agent="gem", remember=Remember.SESSION),
            rule(tool="Edit", kind=PatternKind.PROGRAM, pattern="/p/"),  # another kind: kept
        ]
    )
    assert names(gone) == [("cc", "Bash", "git"), ("gem", "Bash", "git")]
    assert stored_names(store) == [("cc", "Edit", "/p/")]
    assert names(store.rules()) == [("cc", "Edit", "/p/")]
    assert store.revoke([rule()]) == []  # already gone


def test_a_missing_file_then_an_unreadable_path_is_reported(tmp_path: Path) -> None:
    problems: list[str] = []
    blocker = tmp_path / "file"
    blocker.write_text("")
    store = ActionRuleStore(blocker / "r.json", on_problem=problems.append)
    assert store.rules() == []
    assert problems == [f"{blocker / 'r.json'}: cannot read: Not a directory"]
    assert store.problems == problems


def test_problems_go_to_the_log_without_a_callback(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    store = ActionRuleStore(blocker / "r.json")
    with caplog.at_level(logging.WARNING, logger="registry_core.broker.remember.action_rules"):
        store.rules()
    text = f"{blocker / 'r.json'}: cannot read: Not a directory"
    assert [r.getMessage() for r in caplog.records] == [text]
    assert store.problems == [text]


def corrupt(tmp_path: Path, text: str) -> tuple[ActionRuleStore, list[str], Path]:
    path = tmp_path / "action-policies.json"
    path.write_text(text, encoding="utf-8")
    problems: list[str] = []
    # 2026-12-01T10:00:00Z
    store = ActionRuleStore(path, clock=lambda: 1796119200.0, on_problem=problems.append)
    return store, problems, path


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("[]", "expected an object with a 'rules' array"),
        ('{"rules": {}}', "expected an object with a 'rules' array"),
        ('{"version": 1}', "expected an object with a 'rules' array"),
        ('{"rules": [7]}', "a rule must be an object, got int"),
        (
            "{not json",
            "Expecting property name enclosed in double quotes: line 1 column 2 (char 1)",
        ),
    ],
)
def test_a_corrupt_file_is_reported_word_for_word(tmp_path: Path, text: str, error: str) -> None:
    store, problems, path = corrupt(tmp_path, text)
    assert store.rules() == []
    aside = tmp_path / "action-policies.json.corrupt-20261201T100000"
    assert problems == [f"{path}: {error}; kept aside as {aside}"]
    assert aside.read_text() == text and not path.exists()


def test_a_corrupt_file_that_cannot_be_moved_is_said_so(tmp_path: Path) -> None:
    store, problems, path = corrupt(tmp_path, "[]")
    base = tmp_path / "action-policies.json.corrupt-20261201T100000"
    base.write_text("")
    for n in range(2, 1000):
        (tmp_path / f"{base.name}-{n}").write_text("")
    assert store.rules() == []
    assert problems == [
        f"{path}: expected an object with a 'rules' array; could not be moved aside: "
        f"too many corrupt copies of {path}"
    ]
    assert path.read_text() == "[]"


def test_a_good_file_after_a_corrupt_one_is_read(tmp_path: Path) -> None:
    store, problems, path = corrupt(tmp_path, "[]")
    assert store.rules() == []
    path.write_text(json.dumps({"version": 1, "rules": [rule().to_json()]}))
    assert store.rules() == [rule()]
    assert len(problems) == 1


def test_a_rule_file_that_cannot_be_written_is_reported(tmp_path: Path) -> None:
    store, problems, path = corrupt(tmp_path, "")
    path.unlink()
    path.mkdir()  # a directory where the file should be, that cannot be moved aside either
    base = tmp_path / "action-policies.json.corrupt-20261201T100000"
    base.write_text("")
    for n in range(2, 1000):
        (tmp_path / f"{base.name}-{n}").write_text("")
    stored = store.remember("cc", "Bash", PatternKind.PROGRAM, "git", Remember.ALWAYS)
    assert stored == rule(created=1796119200.0)
    assert problems == [
        f"{path}: [Errno 21] Is a directory: '{path}'; could not be moved aside: "
        f"too many corrupt copies of {path}",
        f"{path}: cannot write: cannot write {path}: Is a directory; kept for this session only",
    ]
    # The directory is still there: nothing was stored, the choice lasts for this process.
    assert store.rules() == [stored]
    assert path.is_dir()


def test_the_lock_beside_the_file_is_held_across_processes(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    store = ActionRuleStore(path, clock=lambda: 1.0)
    store.remember("cc", "Bash", PatternKind.PROGRAM, "git", Remember.ALWAYS)
    fd = os.open(str(path) + ".lock", os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX)  # another open file description: as another process
    done = threading.Event()

    def forget() -> None:
        store.forget(agent="cc")
        done.set()

    worker = threading.Thread(target=forget)
    try:
        worker.start()
        assert not done.wait(0.3)
        assert stored_names(store) == [("cc", "Bash", "git")]
    finally:
        os.close(fd)
    worker.join(5)
    assert done.is_set() and stored_names(store) == []


def test_a_held_lock_is_given_up_after_the_stores_own_timeout(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    problems: list[str] = []
    store = ActionRuleStore(
        path, clock=lambda: 1000.0, on_problem=problems.append, lock_timeout=0.2
    )
    store.remember("cc", "Bash", PatternKind.PROGRAM, "git", Remember.ALWAYS)
    fd = os.open(str(path) + ".lock", os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX)  # another open file description: as another process
    try:
        start = time.monotonic()
        stored = store.remember("cc", "Bash", PatternKind.PROGRAM, "make", Remember.ALWAYS)
        took = time.monotonic() - start
    finally:
        os.close(fd)
    assert 0.2 <= took < 5  # the store's 0.2 s, not the lock's default of 10 s
    assert stored == rule(pattern="make")
    [problem] = problems
    assert problem.startswith(f"{path}: cannot write: ")
    assert problem.endswith("; kept for this session only")


def test_remember_never_raises_when_the_directory_cannot_be_made(tmp_path: Path) -> None:
    """The broker stores an approved answer on its way to the reply: a rule file that
    cannot even be locked is a problem to report, and the rule lasts for this broker."""
    blocker = tmp_path / "file"
    blocker.write_text("")
    problems: list[str] = []
    path = blocker / "ollie" / "r.json"
    store = ActionRuleStore(path, clock=lambda: 1000.0, on_problem=problems.append)
    stored = store.remember("cc", "Bash", PatternKind.PROGRAM, "git", Remember.ALWAYS)
    assert stored == rule()
    assert problems == [
        f"{path}: cannot write: [Errno 20] Not a directory: '{path.parent}'; "
        "kept for this session only",
    ]
    assert lookup(store, "git status") == rule()


@pytest.fixture
def ascii_locale() -> Iterator[None]:
    """LC_CTYPE "C" in this process: files opened without an encoding read ASCII."""
    before = locale.setlocale(locale.LC_CTYPE)
    locale.setlocale(locale.LC_CTYPE, "C")
    try:
        if locale.getpreferredencoding(False) == "UTF-8":  # Python's UTF-8 mode
            pytest.skip("UTF-8 mode ignores the locale")
        yield
    finally:
        locale.setlocale(locale.LC_CTYPE, before)


@pytest.mark.usefixtures("ascii_locale")
def test_the_rule_file_is_utf8_whatever_the_locale(tmp_path: Path) -> None:
    """A broker started under an ASCII locale still reads a rule with non-ASCII text."""
    path = tmp_path / "r.json"
    path.write_text(
        json.dumps({"version": 1, "rules": [rule(pattern="ls ü").to_json()]}, ensure_ascii=False),
        encoding="utf-8",
    )
    problems: list[str] = []
    store = ActionRuleStore(path, on_problem=problems.append)
    assert store.rules() == [rule(pattern="ls ü")]
    assert problems == []


def test_a_path_pattern_covers_only_a_real_normal_path() -> None:
    """``ollie-approve`` sends real paths; a path with ``..``, ``.`` or ``//`` left in it
    (another requester's) is never tidied into a remembered directory lexically: through
    a symbolic link it may name a file anywhere."""
    assert cov_path("/p/", "/p/a")
    assert not cov_path("/p/", "/p/link/../../etc/passwd")
    assert not cov_path("/p/", "/p/sub/../a")
    assert not cov_path("/p/a", "/p/./a")
    assert not cov_path("/p/", "/p//a")
