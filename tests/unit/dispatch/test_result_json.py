"""CallResult.to_json: the exact document an agent runtime receives."""

from __future__ import annotations

import json

from registry_core.dispatch.result import CallResult


def test_to_json_is_every_field_as_plain_json() -> None:
    result = CallResult(
        tool="probe",
        exit_code=3,
        stdout="out",
        stderr="err",
        content=[{"type": "text", "text": "out"}],
        structured=True,
        timed_out=False,
        truncated=True,
        duration=1.23456789,
        sandboxed=False,
        elevated=True,
        sudo=True,
        unenforced=("network",),
        argv=("sudo", "-A", "--", "/t/probe"),
        notes=("not part of the document",),
    )
    doc = result.to_json()
    assert doc == {
        "tool": "probe",
        "exit_code": 3,
        "ok": False,
        "content": [{"type": "text", "text": "out"}],
        "structured": True,
        "stdout": "out",
        "stderr": "err",
        "timed_out": False,
        "truncated": True,
        "duration": 1.234568,
        "sandboxed": False,
        "elevated": True,
        "sudo": True,
        "unenforced": ["network"],
        "argv": ["sudo", "-A", "--", "/t/probe"],
    }
    assert list(doc) == list(json.loads(json.dumps(doc)))


def test_to_json_of_a_timed_out_sandboxed_call() -> None:
    result = CallResult(
        tool="slow", exit_code=124, stdout="", stderr="timed out after 1 s", content=[],
        timed_out=True,
    )  # fmt: skip
    assert result.to_json() == {
        "tool": "slow",
        "exit_code": 124,
        "ok": False,
        "content": [],
        "structured": False,
        "stdout": "",
        "stderr": "timed out after 1 s",
        "timed_out": True,
        "truncated": False,
        "duration": 0.0,
        "sandboxed": True,
        "elevated": False,
        "sudo": False,
        "unenforced": [],
        "argv": [],
    }
