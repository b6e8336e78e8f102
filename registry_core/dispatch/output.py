"""Interpret a tool's output (spec: text, or ``{"content": [...]}`` structured output)."""

from __future__ import annotations

import json
from typing import Any

from registry_core.dispatch.process import ProcessResult

ContentBlock = dict[str, Any]


def format_size(size: int) -> str:
    """``10 MiB``, ``64 KiB`` or ``1000 bytes``: exact, never rounded down to ``0 MiB``."""
    for unit, factor in (("MiB", 1024 * 1024), ("KiB", 1024)):
        if size >= factor and size % factor == 0:
            return f"{size // factor} {unit}"
    return f"{size} bytes"


def truncation_marker(dropped: int, limit: int) -> str:
    return f"\n[output truncated: {dropped} bytes over the {format_size(limit)} limit]"


def decode(data: bytes, dropped: int, limit: int) -> str:
    text = data.decode("utf-8", errors="replace")
    return text + truncation_marker(dropped, limit) if dropped else text


def structured_content(stdout: str) -> list[ContentBlock] | None:
    """The tool's own content blocks when stdout is ``{"content": [objects...]}``."""
    stripped = stdout.strip()
    if not stripped.startswith("{"):
        return None
    try:
        doc = json.loads(stripped)
    except ValueError:
        return None
    if not isinstance(doc, dict):
        return None
    content = doc.get("content")
    if not isinstance(content, list) or not all(isinstance(b, dict) for b in content):
        return None
    return content


def content_blocks(
    stdout: str, stderr: str, result: ProcessResult
) -> tuple[list[ContentBlock], bool]:
    """(content blocks, structured?) for an agent runtime."""
    if not result.stdout_dropped:
        blocks = structured_content(stdout)
        if blocks is not None:
            return blocks, True
    text = stdout
    if result.exit_code != 0 and not text.strip():
        text = stderr
    return [{"type": "text", "text": text}], False
