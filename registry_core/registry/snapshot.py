"""An immutable registry snapshot and the API an agent runtime uses.

A :class:`Registry` never changes after it is built; a reload produces a new
one, so a reader holding a snapshot never sees half a reload.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from enum import StrEnum
from pathlib import Path
from typing import Any, NamedTuple

from registry_core.errors import ToolNotFoundError, ToolUnavailableError
from registry_core.registry.model import Status, Tool


class FunctionFormat(StrEnum):
    """Shapes of function definitions that LLM tool-calling APIs accept."""

    PLAIN = "plain"  # {"name", "description", "parameters"}
    OPENAI = "openai"  # {"type": "function", "function": {...plain...}}
    ANTHROPIC = "anthropic"  # {"name", "description", "input_schema"}


class LoadedTool(NamedTuple):
    """What the spec's ``tool_load(name)`` gives the model."""

    name: str
    description: str
    prompt: str
    args: Mapping[str, Any]


class Registry:
    """One read-only snapshot of the tools: by name, the directories scanned and the
    host facts."""

    __slots__ = ("dirs", "host", "tools")

    def __init__(
        self,
        tools: Mapping[str, Tool] | None = None,
        dirs: tuple[Path, ...] = (),
        host: Mapping[str, object] | None = None,
    ) -> None:
        self.tools: Mapping[str, Tool]
        self.dirs: tuple[Path, ...]
        self.host: Mapping[str, object]
        object.__setattr__(self, "tools", {} if tools is None else tools)
        object.__setattr__(self, "dirs", dirs)
        object.__setattr__(self, "host", {} if host is None else host)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"a registry snapshot is read-only (cannot set {name!r})")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"a registry snapshot is read-only (cannot delete {name!r})")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Registry):
            return NotImplemented
        return (self.tools, self.dirs, self.host) == (other.tools, other.dirs, other.host)

    __hash__ = None  # type: ignore[assignment]  # holds mappings

    def __repr__(self) -> str:
        return f"Registry(tools={self.tools!r}, dirs={self.dirs!r}, host={self.host!r})"

    def __contains__(self, name: object) -> bool:
        return name in self.tools

    def __len__(self) -> int:
        return len(self.tools)

    def get(self, name: str) -> Tool:
        try:
            return self.tools[name]
        except KeyError:
            raise ToolNotFoundError(name) from None

    def all(self) -> list[Tool]:
        """Every tool name, available, hidden and broken, sorted by name."""
        return [self.tools[n] for n in sorted(self.tools)]

    def available(self) -> list[Tool]:
        return [t for t in self.all() if t.status is Status.AVAILABLE]

    def usable(self, name: str) -> Tool:
        """The tool if it can be used on this host, else a clear error."""
        tool = self.get(name)
        if tool.status is not Status.AVAILABLE:
            raise ToolUnavailableError(name, tool.status.value, tool.problem)
        return tool

    def listing(self) -> list[tuple[str, str]]:
        """(name, description) of every available tool, for the system prompt."""
        return [(t.name, t.description) for t in self.available()]

    def listing_text(self) -> str:
        return "\n".join(f"- {name}: {desc}" for name, desc in self.listing())

    def load(self, name: str) -> LoadedTool:
        """The spec's ``tool_load``: full documentation and argument schema.

        Raises :class:`~registry_core.errors.ToolChangedError` when the tool's
        ``.meta`` changed after this snapshot was taken (load a new one).
        """
        tool = self.usable(name)
        return LoadedTool(tool.name, tool.description, tool.prompt, copy.deepcopy(dict(tool.args)))

    def function_definitions(
        self, names: Iterable[str] | None = None, style: FunctionFormat = FunctionFormat.PLAIN
    ) -> list[dict[str, Any]]:
        """Function definitions for LLM tool calling (all available tools by default).

        Like :meth:`load`, raises ``ToolChangedError`` for a tool whose file changed
        after this snapshot was taken.
        """
        tools = self.available() if names is None else [self.usable(n) for n in names]
        out: list[dict[str, Any]] = []
        for tool in tools:
            schema = copy.deepcopy(dict(tool.args))
            schema.setdefault("type", "object")
            if style is FunctionFormat.ANTHROPIC:
                out.append(
                    {"name": tool.name, "description": tool.description, "input_schema": schema}
                )
                continue
            plain = {"name": tool.name, "description": tool.description, "parameters": schema}
            if style is FunctionFormat.OPENAI:
                out.append({"type": "function", "function": plain})
            else:
                out.append(plain)
        return out

    def with_changes(self, changes: Mapping[str, Tool | None]) -> Registry:
        """A new snapshot with some names replaced (``None`` removes a name)."""
        tools = dict(self.tools)
        for name, tool in changes.items():
            if tool is None:
                tools.pop(name, None)
            else:
                tools[name] = tool
        return Registry(tools, self.dirs, self.host)
