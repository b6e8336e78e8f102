"""Agents' tool calls as actions: summary, exact detail, diff of edits, narrowest pattern."""

from __future__ import annotations

from pathlib import Path

from registry_core.broker.wire.messages import ActionDisplay, PatternKind
from registry_core.hook.actions import MAX_INPUT_STRING, action_facts


def test_a_simple_command_suggests_its_program() -> None:
    facts = action_facts("Bash", {"command": "git log --oneline -3"}, "/w")
    assert facts.display is ActionDisplay.COMMAND
    assert (facts.detail, facts.command) == ("git log --oneline -3", "git log --oneline -3")
    assert (facts.pattern_kind, facts.pattern) == (PatternKind.PROGRAM, "git")


def test_a_compound_command_is_only_ever_exact() -> None:
    for command in ("git status && rm -rf ~", "ls; reboot", "echo $(id)", "X=1 make", "cat <f"):
        facts = action_facts("Bash", {"command": command}, "/w")
        assert (facts.pattern_kind, facts.pattern) == (PatternKind.EXACT, command), command


def test_an_edit_is_a_diff_of_the_file(tmp_path: Path) -> None:
    target = tmp_path / "a.txt"
    target.write_text("one\ntwo\nthree\n")
    facts = action_facts(
        "Edit", {"file_path": str(target), "old_string": "two", "new_string": "2"}, "/w"
    )
    assert facts.display is ActionDisplay.DIFF
    assert facts.detail is not None
    lines = facts.detail.splitlines()
    assert "-two" in lines and "+2" in lines and " one" in lines
    assert (facts.pattern_kind, facts.pattern, facts.path) == (
        PatternKind.PATH,
        str(target),
        str(target),
    )
    assert facts.summary == f"edit {target}"


def test_a_write_of_a_new_file_diffs_against_nothing(tmp_path: Path) -> None:
    target = tmp_path / "new.py"
    facts = action_facts("Write", {"file_path": str(target), "content": "x = 1\n"}, "/w")
    assert facts.detail is not None
    assert facts.detail.splitlines()[:3] == ["--- /dev/null", f"+++ {target}", "@@ -0,0 +1 @@"]
    assert "+x = 1" in facts.detail.splitlines()


def test_multiedit_applies_every_edit_in_order(tmp_path: Path) -> None:
    target = tmp_path / "m.txt"
    target.write_text("a\nb\n")
    edits = [{"old_string": "a", "new_string": "A"}, {"old_string": "b", "new_string": "B"}]
    facts = action_facts("MultiEdit", {"file_path": str(target), "edits": edits}, "/w")
    assert facts.detail is not None
    assert {"-a", "-b", "+A", "+B"} <= set(facts.detail.splitlines())


def test_relative_paths_resolve_against_cwd_and_inside_cwd_is_exact() -> None:
    inside = action_facts("Write", {"file_path": "src/a.py", "content": ""}, "/w/p")
    assert inside.path == "/w/p/src/a.py" and inside.inside_cwd
    escape = action_facts("Write", {"file_path": "../p2/a.py", "content": ""}, "/w/p")
    assert escape.path == "/w/p2/a.py" and not escape.inside_cwd  # /w/p2 is not /w/p


def test_fetch_and_other_tools_are_exact() -> None:
    fetch = action_facts("WebFetch", {"url": "https://a.example/x", "prompt": "p"}, "/w")
    assert (fetch.summary, fetch.pattern_kind, fetch.pattern) == (
        "fetch https://a.example/x",
        PatternKind.EXACT,
        "fetch https://a.example/x",
    )
    search = action_facts("WebSearch", {"query": "ollie tray"}, "/w")
    assert search.summary == "WebSearch: ollie tray"


def test_long_input_strings_are_clipped_visibly() -> None:
    facts = action_facts("Write", {"file_path": "/w/x", "content": "y" * 10000}, "/w")
    shown = facts.input["content"]
    assert len(shown) < 10000 and shown.startswith("y" * MAX_INPUT_STRING)
    assert "more characters not shown" in shown
