"""Change one configuration file and undo the change, keeping everything else intact.

An :class:`Edit` is a pure function of the file's bytes: :meth:`Edit.install`
adds Ollie's entry, :meth:`Edit.uninstall` takes it out.  :func:`apply` runs one:

- nothing to change (the entry is already there, or already gone): nothing is
  written, so running a command twice changes nothing the second time;
- ``dry_run``: a unified diff is returned and nothing is written;
- else ``<file>.ollie-backup`` gets the file as it was, then the new text is
  written atomically (same mode, missing parent directories created).

Uninstall restores the file byte for byte when it can tell nothing else changed
since: the backup holds no Ollie entry and installing into it gives exactly the
file as it is now.  Otherwise (the file was edited since) only Ollie's entry is
taken out.  A file the install created is deleted again on the same condition.

A file that does not parse is refused with an error naming it, and nothing is
written.  JSON files are written back with the indentation they had; a JSON file
with comments (``//``, ``/* */``: VS Code's JSONC, OpenCode's, Gemini CLI's)
is read but refused for writing, since rewriting it would drop the comments: the
error shows the entry to paste by hand (docs/decisions.md, "Wiring agents up").
TOML goes through ``tomlkit``, which keeps comments and layout.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

BACKUP_SUFFIX = ".ollie-backup"


class WiringError(Exception):
    """A configuration file Ollie will not change (unreadable, corrupt, someone else's)."""


@dataclass(frozen=True)
class Outcome:
    path: Path
    changed: bool
    diff: str
    message: str


class Edit:
    """One file's change; subclasses implement :meth:`install` and :meth:`uninstall`."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def install(self, text: str | None) -> str | None:
        raise NotImplementedError

    def uninstall(self, text: str | None) -> str | None:
        raise NotImplementedError

    def has_entry(self, text: str | None) -> bool:
        return text is not None and self.uninstall(text) != text


# --- JSON --------------------------------------------------------------------------

_JSONC_TOKEN = re.compile(r'"(?:\\.|[^"\\])*"|//[^\n]*|/\*.*?\*/', re.DOTALL)


def strip_comments(text: str) -> str:
    """``text`` without ``//`` and ``/* */`` comments outside strings."""
    return _JSONC_TOKEN.sub(lambda m: m.group(0) if m.group(0).startswith('"') else "", text)


def _indent(text: str) -> int:
    match = re.search(r"\n([ \t]+)\S", text)
    return len(match.group(1).expandtabs(4)) if match else 2


JsonChange = Callable[[dict[str, Any]], None]


class JsonEdit(Edit):
    """A JSON object file: ``add`` puts Ollie's entry into the parsed document,
    ``remove`` takes it out (both in place)."""

    def __init__(self, path: Path, add: JsonChange, remove: JsonChange) -> None:
        super().__init__(path)
        self._add = add
        self._remove = remove

    def _load(self, text: str | None) -> tuple[dict[str, Any], bool]:
        if text is None or not text.strip():
            return {}, False
        plain = strip_comments(text)
        try:
            doc = json.loads(plain)
        except json.JSONDecodeError as exc:
            raise WiringError(
                f"{self.path}: not valid JSON (line {exc.lineno}, column {exc.colno}: "
                f"{exc.msg}); fix or move it, nothing was written"
            ) from None
        if not isinstance(doc, dict):
            raise WiringError(f"{self.path}: a JSON object was expected; nothing was written")
        return doc, plain != text

    def _change(self, text: str | None, change: JsonChange) -> str | None:
        doc, commented = self._load(text)
        before = json.loads(json.dumps(doc))
        change(doc)
        if doc == before:
            return text
        if commented:
            raise WiringError(
                f"{self.path} has comments, which rewriting it would lose; nothing was "
                "written. Make the change by hand (docs/agents/): " + json.dumps(doc, indent=2)
            )
        new = json.dumps(doc, indent=_indent(text or ""), ensure_ascii=False)
        return new + "\n" if text is None or text.endswith("\n") else new

    def install(self, text: str | None) -> str | None:
        return self._change(text, self._add)

    def uninstall(self, text: str | None) -> str | None:
        if text is None:
            return None
        return self._change(text, self._remove)


# --- TOML --------------------------------------------------------------------------


class TomlTableEdit(Edit):
    """``[<section>.<name>]`` in a TOML file (Codex's ``[mcp_servers.ollie]``)."""

    def __init__(self, path: Path, section: str, name: str, table: dict[str, Any]) -> None:
        super().__init__(path)
        self.section = section
        self.name = name
        self.table = table

    def _parse(self, text: str) -> Any:
        import tomlkit
        from tomlkit.exceptions import ParseError

        try:
            return tomlkit.parse(text)
        except ParseError as exc:
            raise WiringError(f"{self.path}: not valid TOML ({exc}); nothing was written") from None

    def install(self, text: str | None) -> str | None:
        import tomlkit

        doc = self._parse(text or "")
        section = doc.get(self.section)
        appended = section is None
        if section is None:
            section = tomlkit.table(is_super_table=True)
            doc[self.section] = section
        elif not isinstance(section, dict):
            raise WiringError(f"{self.path}: {self.section!r} is not a table; nothing was written")
        current = section.get(self.name)
        if current is not None and current.unwrap() == self.table:
            return text
        entry = tomlkit.table()
        for key, value in self.table.items():
            if isinstance(value, dict):  # env = { ... }: one line, as Codex's docs write it
                inline = tomlkit.inline_table()
                inline.update(value)
                entry[key] = inline
            else:
                entry[key] = value
        if not appended:  # among other tables: keep a blank line before the next one
            entry.add(tomlkit.nl())
        section[self.name] = entry
        return str(tomlkit.dumps(doc))

    def uninstall(self, text: str | None) -> str | None:
        if text is None:
            return None
        doc = self._parse(text)
        section = doc.get(self.section)
        if not isinstance(section, dict) or self.name not in section:
            return text
        del section[self.name]
        if not section:
            del doc[self.section]
        return str(doc.as_string())


# --- A whole file Ollie owns -------------------------------------------------------


class OwnedFile(Edit):
    """A file that is all Ollie's (the OpenCode plugin, Cline's ``PreToolUse`` script):
    recognised by ``marker``; someone else's file at that path is never replaced."""

    def __init__(self, path: Path, content: str, marker: str, mode: int = 0o644) -> None:
        super().__init__(path)
        self.content = content
        self.marker = marker
        self.mode = mode

    def install(self, text: str | None) -> str | None:
        if text is not None and self.marker not in text:
            raise WiringError(
                f"{self.path} exists and is not Ollie's; nothing was written. Move it away "
                "or call ollie-approve from it yourself (docs/agents/)"
            )
        return self.content

    def uninstall(self, text: str | None) -> str | None:
        if text is None or self.marker not in text:
            return text
        return None


# --- Running an edit ---------------------------------------------------------------


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise WiringError(f"{path}: cannot be read ({exc}); nothing was written") from None


def _diff(path: Path, old: str | None, new: str | None) -> str:
    lines = difflib.unified_diff(
        (old or "").splitlines(keepends=True),
        (new or "").splitlines(keepends=True),
        fromfile=str(path) if old is not None else "/dev/null",
        tofile=str(path) if new is not None else "/dev/null",
    )
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


def _write(path: Path, text: str, mode: int | None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        mode = path.stat().st_mode & 0o7777 if mode is None else mode
    except FileNotFoundError:
        mode = 0o644 if mode is None else mode
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
            handle.write(text)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def backup_path(path: Path) -> Path:
    return path.with_name(path.name + BACKUP_SUFFIX)


def _restorable(edit: Edit, current: str | None) -> tuple[bool, str | None]:
    """(True, the original) when undoing the install means putting the original back."""
    backup = backup_path(edit.path)
    try:
        original: str | None = backup.read_text(encoding="utf-8")
    except FileNotFoundError:
        original = None
    except (OSError, UnicodeDecodeError):
        return False, None
    try:
        if edit.has_entry(original):
            return False, None
        return edit.install(original) == current, original
    except WiringError:
        return False, None


def apply(edit: Edit, *, uninstall: bool = False, dry_run: bool = False) -> Outcome:
    path = edit.path
    current = _read(path)
    if uninstall:
        restore, original = _restorable(edit, current) if edit.has_entry(current) else (False, None)
        new = original if restore else edit.uninstall(current)
    else:
        new = edit.install(current)
    if new == current:
        state = "not there" if uninstall else "already in place"
        return Outcome(path, False, "", f"{path}: Ollie's entry {state}, nothing changed")
    diff = _diff(path, current, new)
    if dry_run:
        return Outcome(path, False, diff, f"{path}: would change (dry run, nothing written)")
    backup = backup_path(path)
    if new is None:  # uninstall of a file the install created: nothing of anyone else's
        path.unlink()
        backup.unlink(missing_ok=True)
        return Outcome(path, True, diff, f"{path}: removed (Ollie had created it)")
    if current is not None and not (uninstall and restore_done(new, backup)):
        _write(backup, current, None)
    _write(path, new, edit.mode if isinstance(edit, OwnedFile) else None)
    if uninstall and restore_done(new, backup):
        backup.unlink(missing_ok=True)
        return Outcome(path, True, diff, f"{path}: restored as it was before Ollie")
    verb = "taken out of" if uninstall else "written to"
    return Outcome(path, True, diff, f"{path}: Ollie's entry {verb} it (backup: {backup})")


def restore_done(new: str, backup: Path) -> bool:
    try:
        return backup.read_text(encoding="utf-8") == new
    except (OSError, UnicodeDecodeError):
        return False
