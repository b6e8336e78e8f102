"""JSON-ready views of registry objects (shared by the CLI, the broker and the tray)."""

from __future__ import annotations

from typing import Any

from registry_core.errors import MetaError
from registry_core.registry.model import MetaWarning, Tool


def error_json(err: MetaError) -> dict[str, Any]:
    return {"path": err.path, "line": err.line, "column": err.column, "message": err.message}


def warning_json(warn: MetaWarning) -> dict[str, Any]:
    return {"path": warn.path, "line": warn.line, "column": warn.column, "message": warn.message}


def tool_summary(tool: Tool) -> dict[str, Any]:
    """The ``ollie-tools list --json`` object for one tool."""
    return {
        "name": tool.name,
        "status": tool.status.value,
        "description": tool.description,
        "tier": tool.tier.value,
        "readOnly": tool.read_only,
        "sudo": tool.sudo,
        "elevated": tool.elevated,
        "executable": str(tool.executable) if tool.executable else None,
        "variant": tool.variant,
        "source": str(tool.source),
        "shadowed": [str(p) for p in tool.shadowed],
    }


def tool_details(tool: Tool) -> dict[str, Any]:
    """The ``ollie-tools show --json`` object: everything the registry knows."""
    out = tool_summary(tool)
    out.update(
        {
            "prompt": tool.prompt,
            "args": tool.args,
            "cmd": tool.cmd,
            "variants": [
                {
                    "index": v.index,
                    "matched": v.matched,
                    "selected": v.index == tool.variant,
                    "fields": list(v.fields),
                    "conditions": [
                        {"key": c.key, "value": c.value, "passed": c.passed, "detail": c.detail}
                        for c in v.conditions
                    ],
                }
                for v in tool.variants
            ],
            "resolution": tool.resolution.value if tool.resolution else None,
            "resolution_detail": tool.resolution_detail,
            "problem": tool.problem,
            "errors": [error_json(e) for e in tool.errors],
            "warnings": [warning_json(w) for w in tool.warnings],
        }
    )
    return out
