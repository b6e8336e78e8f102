"""Human-readable terminal output for the registry (aligned columns, pass/fail marks)."""

from __future__ import annotations

import json
from collections.abc import Sequence

from registry_core.registry import Status, Tool

MARK_OK = "✓"
MARK_BAD = "✗"


def _use_ascii(encoding: str | None) -> bool:
    return not (encoding or "").lower().replace("-", "").startswith("utf")


def table(rows: Sequence[Sequence[str]], headers: Sequence[str]) -> str:
    """Left-aligned columns; the last column is not padded."""
    widths = [len(h) for h in headers]
    for row in rows:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(cell))
    lines = []
    for row in [headers, *rows]:
        cells = [c.ljust(widths[i]) for i, c in enumerate(row[:-1])]
        lines.append("  ".join([*cells, row[-1]]).rstrip())
    return "\n".join(lines)


def _flags(tool: Tool) -> str:
    flags = []
    if tool.read_only:
        flags.append("ro")
    if tool.elevated:
        flags.append("elevated")
    if tool.sudo:
        flags.append("sudo")
    if tool.shadowed:
        flags.append("shadows")
    return ",".join(flags) or "-"


def list_text(tools: Sequence[Tool]) -> str:
    if not tools:
        return "no tools"
    rows = []
    for t in tools:
        desc = t.description if t.status is Status.AVAILABLE else t.problem
        rows.append(
            [t.name, t.status.value, t.tier.value, _flags(t), desc.splitlines()[0] if desc else ""]
        )
    return table(rows, ["NAME", "STATUS", "TIER", "FLAGS", "DESCRIPTION"])


def show_text(tool: Tool, encoding: str | None = "utf-8") -> str:
    ok, bad = ("ok", "FAIL") if _use_ascii(encoding) else (MARK_OK, MARK_BAD)
    out = [f"{tool.name}  [{tool.status.value}]"]
    fields = [
        ("source", str(tool.source)),
        ("description", tool.description),
        ("tier", tool.tier.value),
        ("readOnly", str(tool.read_only).lower()),
        ("sudo", str(tool.sudo).lower()),
        ("elevated", str(tool.elevated).lower()),
        ("variant", "-" if tool.variant is None else str(tool.variant)),
        ("executable", str(tool.executable) if tool.executable else "-"),
        ("resolved by", tool.resolution.value if tool.resolution else "-"),
        ("how", tool.resolution_detail or "-"),
    ]
    out += [f"  {k + ':':<13}{v}" for k, v in fields]
    if tool.status is not Status.AVAILABLE:
        out.append(f"  {'problem:':<13}{tool.problem}")
    for path in tool.shadowed:
        out.append(f"  {'shadows:':<13}{path}")
    if tool.variants:
        out.append("variants:")
        for v in tool.variants:
            mark = (
                "selected" if v.index == tool.variant else ("matched" if v.matched else "no match")
            )
            out.append(f"  [{v.index}] {mark}   sets: {', '.join(v.fields) or '-'}")
            rows = [[ok if c.passed else bad, c.key, c.value, c.detail] for c in v.conditions]
            if rows:
                sub = table(rows, ["", "KEY", "VALUE", "RESULT"])
                out += ["      " + line for line in sub.splitlines()]
            else:
                out.append("      (no conditions: always matches)")
    if tool.args:
        out.append("args:")
        out += ["  " + line for line in json.dumps(tool.args, indent=2).splitlines()]
    if tool.prompt:
        out.append("prompt:")
        out += ["  " + line for line in tool.prompt.splitlines()]
    for err in tool.errors:
        out.append(f"error: {err}")
    for warn in tool.warnings:
        out.append(f"warning: {warn}")
    return "\n".join(out)
