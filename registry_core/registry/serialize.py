"""JSON-ready views of registry objects (shared by the CLI, the broker and the tray)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from registry_core.errors import MetaError
from registry_core.registry.model import (
    ConditionResult,
    MetaWarning,
    Resolution,
    Status,
    Tier,
    Tool,
    ToolDocs,
    VariantResult,
)
from registry_core.registry.snapshot import Registry


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
        "executable": tool.executable_file,
        "variant": tool.variant,
        "source": tool.source_file,
        "shadowed": list(tool.shadowed_files),
    }


def tool_details(tool: Tool) -> dict[str, Any]:
    """The ``ollie-tools show --json`` object: everything the registry knows."""
    out = tool_summary(tool)
    out.update(
        {
            "prompt": tool.prompt,
            "args": dict(tool.args),
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


# --- the other direction: a registry another host sent (ollie-tools dump) ------------

DUMP_FORMAT = 1


def registry_dump(registry: Registry, hostname: str) -> dict[str, Any]:
    """The ``ollie-tools dump --json`` object: every tool's :func:`tool_details`."""
    return {
        "format": DUMP_FORMAT,
        "hostname": hostname,
        "host": dict(registry.host),
        "dirs": [str(d) for d in registry.dirs],
        "tools": [tool_details(t) for t in registry.all()],
    }


def _opt_int(value: Any) -> int | None:
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"expected an integer or null, got {value!r}")
    return value


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(f"expected a string, got {value!r}")
    return value


def tool_from_details(obj: Mapping[str, Any]) -> Tool:
    """The :class:`Tool` a :func:`tool_details` object describes (its inverse).

    Everything round-trips except what ``tool_details`` derives (``selected``,
    ``problem``) and the identity of ``errors``: :class:`MetaError` is an
    exception, so rebuilt errors equal the originals by value (path, message,
    line, column), not by ``==``.  Raises ``KeyError``/``TypeError``/``ValueError``
    for objects that are not tool details.
    """
    executable = obj.get("executable")
    resolution = obj.get("resolution")
    return Tool(
        name=_text(obj["name"]),
        source_file=_text(obj["source"]),
        status=Status(obj["status"]),
        description=_text(obj.get("description", "")),
        docs=ToolDocs(_text(obj.get("prompt", "")), dict(obj.get("args") or {})),
        tier=Tier(obj.get("tier", "hot")),
        read_only=bool(obj.get("readOnly", False)),
        cmd=None if obj.get("cmd") is None else _text(obj["cmd"]),
        sudo=bool(obj.get("sudo", False)),
        elevated=bool(obj.get("elevated", False)),
        variant=_opt_int(obj.get("variant")),
        variants=tuple(
            VariantResult(
                index=int(v["index"]),
                matched=bool(v["matched"]),
                conditions=tuple(
                    ConditionResult(
                        _text(c["key"]), _text(c["value"]), bool(c["passed"]), _text(c["detail"])
                    )
                    for c in v.get("conditions", ())
                ),
                fields=tuple(_text(f) for f in v.get("fields", ())),
            )
            for v in obj.get("variants", ())
        ),
        executable_file=None if executable is None else _text(executable),
        resolution=None if resolution is None else Resolution(resolution),
        resolution_detail=_text(obj.get("resolution_detail", "")),
        errors=tuple(
            MetaError(
                _text(e["path"]),
                _text(e["message"]),
                _opt_int(e.get("line")),
                _opt_int(e.get("column")),
            )
            for e in obj.get("errors", ())
        ),
        warnings=tuple(
            MetaWarning(
                _text(w["path"]),
                _text(w["message"]),
                _opt_int(w.get("line")),
                _opt_int(w.get("column")),
            )
            for w in obj.get("warnings", ())
        ),
        shadowed_files=tuple(_text(p) for p in obj.get("shadowed", ())),
    )


def registry_from_dump(obj: Mapping[str, Any]) -> Registry:
    """The :class:`Registry` of a :func:`registry_dump` (another host's view)."""
    if obj.get("format") != DUMP_FORMAT:
        raise ValueError(f"unknown dump format {obj.get('format')!r} (this version reads 1)")
    tools = [tool_from_details(t) for t in obj["tools"]]
    host = dict(obj.get("host") or {})
    host["hostname"] = obj.get("hostname", "")
    return Registry({t.name: t for t in tools}, tuple(Path(d) for d in obj.get("dirs", ())), host)
