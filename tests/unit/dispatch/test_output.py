"""Interpreting a tool's output: structured content blocks or one text block, markers."""

from __future__ import annotations

import json

import pytest

from registry_core.dispatch.output import (
    content_blocks,
    decode,
    format_size,
    structured_content,
    truncation_marker,
)
from registry_core.dispatch.process import ProcessResult
from registry_core.dispatch.result import CallResult


def process(exit_code: int = 0, stdout_dropped: int = 0) -> ProcessResult:
    return ProcessResult(
        exit_code=exit_code,
        stdout=b"",
        stderr=b"",
        stdout_dropped=stdout_dropped,
        stderr_dropped=0,
        timed_out=False,
        duration=0.1,
    )


BLOCKS = [{"type": "text", "text": "hi"}, {"type": "resource", "uri": "file:///x"}]


@pytest.mark.parametrize(
    "stdout",
    [
        json.dumps({"content": BLOCKS}),
        "\n  " + json.dumps({"content": BLOCKS}, indent=2) + "\n\n",
        json.dumps({"content": BLOCKS, "isError": False}),
    ],
)
def test_structured_content_is_recognised(stdout: str) -> None:
    assert structured_content(stdout) == BLOCKS


def test_empty_content_list_is_structured() -> None:
    assert structured_content('{"content": []}') == []


@pytest.mark.parametrize(
    "stdout",
    [
        "",
        "hello",
        '{"result": 1}',
        '{"content": {"type": "text"}}',
        '{"content": "text"}',
        '{"content": null}',
        '{"content": [{"type": "text"}, "loose string"]}',
        '[{"content": []}]',
        '{"content": [] ',
        '{"content": []} trailing',
        '"{\\"content\\": []}"',
    ],
)
def test_anything_else_is_not_structured(stdout: str) -> None:
    assert structured_content(stdout) is None


def test_content_blocks_pass_structured_output_through() -> None:
    blocks, structured = content_blocks(json.dumps({"content": BLOCKS}), "", process())
    assert (blocks, structured) == (BLOCKS, True)


def test_structured_output_of_a_failed_tool_is_still_structured() -> None:
    blocks, structured = content_blocks(json.dumps({"content": BLOCKS}), "oops", process(1))
    assert (blocks, structured) == (BLOCKS, True)


def test_plain_stdout_is_one_text_block() -> None:
    assert content_blocks("result\n", "noise", process()) == (
        [{"type": "text", "text": "result\n"}],
        False,
    )


def test_failed_tool_without_stdout_shows_stderr() -> None:
    assert content_blocks("  \n", "it broke\n", process(2)) == (
        [{"type": "text", "text": "it broke\n"}],
        False,
    )


def test_successful_tool_without_stdout_is_an_empty_text_block() -> None:
    assert content_blocks("", "just a warning", process(0)) == (
        [{"type": "text", "text": ""}],
        False,
    )


def test_truncated_stdout_is_never_structured() -> None:
    text = json.dumps({"content": BLOCKS})
    blocks, structured = content_blocks(text, "", process(stdout_dropped=10))
    assert structured is False
    assert blocks == [{"type": "text", "text": text}]


@pytest.mark.parametrize(
    ("size", "text"),
    [
        (10 * 1024 * 1024, "10 MiB"),
        (1024 * 1024, "1 MiB"),
        (64 * 1024, "64 KiB"),
        (1000, "1000 bytes"),
        (1536 * 1024, "1536 KiB"),
        (1024 * 1024 + 1, "1048577 bytes"),
        (0, "0 bytes"),
    ],
)
def test_format_size_is_exact(size: int, text: str) -> None:
    assert format_size(size) == text


def test_truncation_marker_names_the_dropped_bytes_and_the_limit() -> None:
    assert truncation_marker(5, 10 * 1024 * 1024) == (
        "\n[output truncated: 5 bytes over the 10 MiB limit]"
    )
    assert truncation_marker(999_000, 1000) == (
        "\n[output truncated: 999000 bytes over the 1000 bytes limit]"
    )


def test_decode_appends_the_marker_only_when_bytes_were_dropped() -> None:
    assert decode(b"abc", 0, 1000) == "abc"
    assert decode(b"abc", 7, 1000).startswith("abc\n[output truncated: 7 bytes")


def test_decode_replaces_invalid_utf8() -> None:
    assert decode(b"ok \xff\xfe", 0, 1000) == "ok \ufffd\ufffd"


def test_call_result_error_and_json() -> None:
    ok = CallResult(tool="t", exit_code=0, stdout="out", stderr="warn", content=[])
    assert ok.ok
    assert ok.error == ""
    failed = CallResult(tool="t", exit_code=1, stdout="", stderr=" bad \n", content=[])
    assert failed.error == "bad"
    timed = CallResult(
        tool="t", exit_code=124, stdout="partial", stderr="timed out after 1 s", content=[],
        timed_out=True,
    )  # fmt: skip
    assert not timed.ok
    assert timed.error == "timed out after 1 s"
    doc = failed.to_json()
    assert {"exit_code", "content", "stdout", "stderr", "ok", "sandboxed"} <= set(doc)
    assert doc["exit_code"] == 1
    assert doc["ok"] is False
    json.dumps(doc)
