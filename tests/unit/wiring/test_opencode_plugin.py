"""The shipped OpenCode plugin, run by node against a stand-in ollie-approve: a deny
throws (OpenCode does not run the tool), an allow answers OpenCode's permission
prompt for that call, an ask (or no ollie-approve at all) leaves OpenCode to decide."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from registry_core.wiring import targets

pytestmark = pytest.mark.skipif(shutil.which("node") is None, reason="needs node")

DRIVER = """
const { OllieApprove } = await import(process.argv[2]);
const hooks = await OllieApprove({ directory: "/home/u/p" });
const result = {};
try {
  await hooks["tool.execute.before"](
    { tool: "edit", sessionID: "ses_1", callID: "call_1" },
    { args: { filePath: "/home/u/p/a.py", oldString: "a", newString: "b" } },
  );
  result.thrown = null;
} catch (err) {
  result.thrown = err.message;
}
const output = { status: "ask" };
await hooks["permission.ask"]({ callID: "call_1", type: "edit" }, output);
result.status = output.status;
console.log(JSON.stringify(result));
"""


def _run(tmp_path: Path, answer: str | None) -> dict[str, object]:
    fake = tmp_path / "ollie-approve"
    seen = tmp_path / "seen.json"
    if answer is not None:
        fake.write_text(f"#!/bin/sh\ncat > {seen}\necho '{answer}'\n")
        fake.chmod(0o755)
    plugin = tmp_path / "ollie-approve.mjs"
    plugin.write_text(targets.opencode_plugin(str(fake)))
    driver = tmp_path / "driver.mjs"
    driver.write_text(DRIVER)
    done = subprocess.run(
        ["node", str(driver), str(plugin)], capture_output=True, text=True, timeout=60, check=True
    )
    result: dict[str, object] = json.loads(done.stdout.splitlines()[-1])
    if answer is not None:
        result["request"] = json.loads(seen.read_text())
    return result


def test_a_deny_stops_the_tool_with_the_reason(tmp_path: Path) -> None:
    result = _run(tmp_path, '{"decision": "deny", "reason": "denied in Ollie: no"}')
    assert result["thrown"] == "denied in Ollie: no"
    assert result["status"] == "ask"
    assert result["request"] == {
        "agent": "opencode",
        "tool": "Edit",
        "input": {"file_path": "/home/u/p/a.py", "old_string": "a", "new_string": "b"},
        "cwd": "/home/u/p",
        "session": "ses_1",
    }


def test_an_allow_answers_opencodes_prompt_for_that_call(tmp_path: Path) -> None:
    result = _run(tmp_path, '{"decision": "allow", "reason": "approved in Ollie"}')
    assert (result["thrown"], result["status"]) == (None, "allow")


@pytest.mark.parametrize("answer", ['{"decision": "ask", "reason": "no broker"}', None])
def test_no_answer_leaves_it_to_opencode(tmp_path: Path, answer: str | None) -> None:
    result = _run(tmp_path, answer)
    assert (result["thrown"], result["status"]) == (None, "ask")
