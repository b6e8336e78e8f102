"""``confirm_pattern`` against a real child process standing in for the dialog program.

The headless front-ends' tests drive it through kdialog and zenity; here the
entry's arguments are the test's own, so each step is seen: what is shown
again after a refusal, every reason word for word, and the cases that ask
nothing at all.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest
from action_requests import EDITED_FILE, edit_request
from test_dialog_prompters import FakeDialog, run
from test_prompt_text import make_request

from registry_core.broker.ask.dialog_process import DialogProcesses
from registry_core.broker.ask.pattern_dialog import confirm_pattern
from registry_core.broker.question import Approval, ApprovalRequest, Remember

ALWAYS = Approval(True, Remember.ALWAYS, "approved in fakedialog")
PROJECT = "/home/a/proj/"


def entry(problem: str | None, shown: str) -> list[str]:
    return [f"problem={problem}", f"shown={shown}"]


def confirm(
    tmp_path: Path, *answers: dict[str, object], request: ApprovalRequest | None = None
) -> tuple[Approval, list[list[str]]]:
    fake = FakeDialog(tmp_path, "fakedialog")
    fake.answer(*answers)
    dialogs = DialogProcesses(fake.program, fake.env)
    request = request or edit_request()
    approval = run(lambda: confirm_pattern(dialogs, request, ALWAYS, entry, "fakedialog"))
    return approval, [call["argv"] for call in fake.calls()]


def test_ok_on_the_suggestion_keeps_it(tmp_path: Path) -> None:
    approval, calls = confirm(tmp_path, {"status": 0, "stdout": f"  {EDITED_FILE} \n"})
    assert approval == Approval(True, Remember.ALWAYS, "approved in fakedialog", EDITED_FILE)
    assert calls == [["problem=None", f"shown={EDITED_FILE}"]]


def test_a_refused_pattern_is_shown_again_with_the_reason(tmp_path: Path) -> None:
    approval, calls = confirm(
        tmp_path, {"status": 0, "stdout": "/etc/\n"}, {"status": 0, "stdout": f"{PROJECT}\n"}
    )
    assert approval == Approval(True, Remember.ALWAYS, "approved in fakedialog", PROJECT)
    assert calls == [
        ["problem=None", f"shown={EDITED_FILE}"],
        ["problem='/etc/' does not cover this action", "shown=/etc/"],
    ]


def test_three_refusals_remember_nothing_and_say_why(tmp_path: Path) -> None:
    bad = {"status": 0, "stdout": "/etc/\n"}
    empty = {"status": 0, "stdout": "\n"}
    approval, calls = confirm(tmp_path, bad, bad, empty, bad)
    assert approval == Approval(
        True,
        Remember.ONCE,
        "approved in fakedialog (not remembered: an empty pattern covers nothing)",
    )
    assert len(calls) == 3
    assert calls[2] == ["problem='/etc/' does not cover this action", "shown=/etc/"]


def test_cancel_remembers_nothing_and_names_the_program(tmp_path: Path) -> None:
    approval, calls = confirm(tmp_path, {"status": 1, "stdout": f"{PROJECT}\n"})
    assert approval == Approval(
        True,
        Remember.ONCE,
        "approved in fakedialog (not remembered: the pattern was not confirmed in fakedialog)",
    )
    assert len(calls) == 1


def test_an_answer_that_is_not_utf8_remembers_nothing(tmp_path: Path) -> None:
    fake = FakeDialog(tmp_path, "fakedialog")
    script = Path(fake.program)
    script.write_text(f"#!{sys.executable}\nimport os\nos.write(1, b'\\xff/x\\n')\n")
    dialogs = DialogProcesses(fake.program, fake.env)
    approval = run(lambda: confirm_pattern(dialogs, edit_request(), ALWAYS, entry, "fakedialog"))
    assert approval == Approval(
        True,
        Remember.ONCE,
        "approved in fakedialog (not remembered: the dialog's answer is not valid UTF-8)",
    )


def test_a_withdrawn_entry_is_the_withdrawn_denial(tmp_path: Path) -> None:
    fake = FakeDialog(tmp_path, "fakedialog")
    fake.answer({"hang": True})
    dialogs = DialogProcesses(fake.program, fake.env)
    request = edit_request()

    async def scenario() -> Approval:
        task = asyncio.ensure_future(confirm_pattern(dialogs, request, ALWAYS, entry, "fakedialog"))
        await fake.wait_for_call(0)
        while dialogs.running() == 0:
            await asyncio.sleep(0.01)
        assert dialogs.withdraw(request.id, "policy") == 1
        return await task

    assert run(scenario) == Approval(False, Remember.ONCE, "withdrawn: decided by policy")


@pytest.mark.parametrize(
    ("request_", "approval"),
    [
        (edit_request(), Approval(True, Remember.ONCE, "approved in fakedialog")),
        (make_request(), ALWAYS),  # a tool request has no pattern
        (edit_request("a\\b"), ALWAYS),  # not editable on one line
    ],
    ids=["once", "tool", "backslash"],
)
def test_nothing_is_asked_when_there_is_no_pattern_to_confirm(
    tmp_path: Path, request_: ApprovalRequest, approval: Approval
) -> None:
    fake = FakeDialog(tmp_path, "fakedialog")
    dialogs = DialogProcesses(fake.program, fake.env)
    assert (
        run(lambda: confirm_pattern(dialogs, request_, approval, entry, "fakedialog")) is approval
    )
    assert fake.calls() == []
