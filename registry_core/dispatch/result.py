"""The outcome of one tool call, as an agent runtime sees it."""

from __future__ import annotations

from typing import Any, NamedTuple

from registry_core.dispatch.output import ContentBlock


class CallResult(NamedTuple):
    tool: str
    exit_code: int
    stdout: str
    stderr: str
    content: list[ContentBlock]
    structured: bool = False
    timed_out: bool = False
    truncated: bool = False
    duration: float = 0.0
    sandboxed: bool = True
    elevated: bool = False
    sudo: bool = False
    unenforced: tuple[str, ...] = ()
    argv: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out

    @property
    def error(self) -> str:
        """The spec's error message: stdout or stderr of a failed call."""
        if self.ok:
            return ""
        if self.timed_out:
            return self.stderr.strip() or "timed out"
        return self.stdout.strip() or self.stderr.strip() or f"exit status {self.exit_code}"

    def to_json(self) -> dict[str, Any]:
        return {
            "tool": self.tool,
            "exit_code": self.exit_code,
            "ok": self.ok,
            "content": self.content,
            "structured": self.structured,
            "stdout": self.stdout,
            "stderr": self.stderr,
            "timed_out": self.timed_out,
            "truncated": self.truncated,
            "duration": round(self.duration, 6),
            "sandboxed": self.sandboxed,
            "elevated": self.elevated,
            "sudo": self.sudo,
            "unenforced": list(self.unenforced),
            "argv": list(self.argv),
        }
