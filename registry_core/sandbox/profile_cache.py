"""A sandbox profile's parse, remembered beside the profile and keyed by its exact text.

Every sandboxed ``ollie-tools call`` loads its profile; parsing the YAML means
importing a YAML parser.  This module is kept for that user-visible figure:
without it the call was measured at 1.2x its whole-process time (budget: 3x
``python -I`` + ``bwrap``, already about 3x).  After a successful parse the
result is written next to the profile as ``.<name>.yaml.parsed.json``; the
next load reads the profile exactly as before (same safe-open rules), and
uses the remembered parse only when

* the remembered text is **byte for byte** the text just read (not a hash:
  nothing to collide), with the same profile name and source path;
* it was made by this very parser: a fingerprint of the parsing modules'
  source, PyYAML's and Python's version (any change forgets it);
* the file is a regular file (not followed if a link), owned by this user,
  writable by nobody else, at most a few MiB; and its content has exactly
  the expected shape and types.

Anything else is ignored and the profile parsed as before: losing the file
only costs time.  It lives in the profile's own directory on purpose: a
sandboxed tool that could write it could write the profile beside it, so it
adds no new way to change what a sandbox allows (see docs/decisions.md).
"""

from __future__ import annotations

import importlib.util
import json
import sys
import zlib
from pathlib import Path
from typing import Any

from registry_core.safe_open import read_own_cache, write_own_cache
from registry_core.sandbox.limits import LimitsSection
from registry_core.sandbox.profiles import (
    AdvancedSection,
    FilesystemSection,
    GeneralSection,
    LogLevel,
    NetworkSection,
    SandboxProfile,
)

FORMAT = "ollie-profile-parse"
VERSION = 3
MAX_BYTES = 4 * 1024 * 1024  # the profile (1 MiB) and its parse
_FINGERPRINT: list[str] = []


def cache_path(profile: Path) -> Path:
    return profile.with_name(f".{profile.name}.parsed.json")


def fingerprint() -> str:
    """Names the code that turns a profile's text into a :class:`SandboxProfile`."""
    if not _FINGERPRINT:
        here = Path(__file__).resolve().parent
        parts = [f"{FORMAT} {VERSION} {sys.version}"]
        files = [here / f for f in ("profiles.py", "profile_parse.py", "yamlnodes.py", "limits.py")]
        files.append(here.parent / "egress" / "rules.py")  # checks allow_hosts / deny_hosts
        spec = importlib.util.find_spec("yaml")
        if spec is not None and spec.origin:
            files.append(Path(spec.origin))  # holds PyYAML's __version__
        for file in files:
            try:
                parts.append(f"{file}:{zlib.crc32(file.read_bytes()):08x}")
            except OSError:
                parts.append(f"{file}:unreadable")
        _FINGERPRINT.append("\n".join(parts))
    return _FINGERPRINT[0]


def _strs(value: Any) -> tuple[str, ...]:
    if type(value) is not list or any(type(v) is not str for v in value):
        raise ValueError("expected a list of strings")
    return tuple(value)


def _ints(value: Any) -> tuple[int, ...]:
    if type(value) is not list or any(type(v) is not int for v in value):
        raise ValueError("expected a list of integers")
    return tuple(value)


def _limits(value: Any) -> LimitsSection:
    if (
        type(value) is not list
        or len(value) != 3
        or any(v is not None and (type(v) is not int or v < 1) for v in value)
    ):
        raise ValueError("limits: expected [tasks, memory, cpu]")
    return LimitsSection(*value)


def _bool(value: Any) -> bool:
    if type(value) is not bool:
        raise ValueError("expected a boolean")
    return value


def to_json(p: SandboxProfile) -> dict[str, Any]:
    fs, net, gen, adv = p.filesystem, p.network, p.general, p.advanced
    return {
        "filesystem": [list(fs.ro), list(fs.rox), list(fs.rw), list(fs.rwx), list(fs.lines)],
        "network": [
            net.enabled,
            net.unrestricted,
            list(net.bind_tcp),
            list(net.connect_tcp),
            list(net.allow_hosts),
            list(net.deny_hosts),
            net.ask,
            list(net.host_lines),
        ],
        "env": list(p.env),
        "general": [gen.best_effort, gen.log_level.value],
        "advanced": [adv.ldd, adv.add_exec, list(adv.exec_paths)],
        "warnings": list(p.warnings),
        "env_values": [[k, v] for k, v in p.env_values],
        "limits": list(p.limits),
    }


def from_json(doc: Any, *, name: str, source: str) -> SandboxProfile:
    """The profile ``doc`` describes; ``ValueError`` for any other shape."""
    if type(doc) is not dict:
        raise ValueError("expected an object")
    fs, net, gen, adv = doc["filesystem"], doc["network"], doc["general"], doc["advanced"]
    if not (len(fs) == 5 and len(net) == 8 and len(gen) == 2 and len(adv) == 3):
        raise ValueError("wrong section sizes")
    pairs = doc["env_values"]
    if type(pairs) is not list or any(
        type(e) is not list or len(e) != 2 or any(type(x) is not str for x in e) for e in pairs
    ):
        raise ValueError("env_values: expected [name, value] pairs")
    if type(gen[1]) is not str:
        raise ValueError("general.log_level: expected a string")
    return SandboxProfile(
        name=name,
        source=source,
        filesystem=FilesystemSection(
            _strs(fs[0]), _strs(fs[1]), _strs(fs[2]), _strs(fs[3]), _ints(fs[4])
        ),
        network=NetworkSection(
            _bool(net[0]),
            _bool(net[1]),
            _ints(net[2]),
            _ints(net[3]),
            _strs(net[4]),
            _strs(net[5]),
            _bool(net[6]),
            _ints(net[7]),
        ),
        env=_strs(doc["env"]),
        general=GeneralSection(_bool(gen[0]), LogLevel(gen[1])),
        advanced=AdvancedSection(_bool(adv[0]), _bool(adv[1]), _strs(adv[2])),
        warnings=_strs(doc["warnings"]),
        env_values=tuple((k, v) for k, v in pairs),
        limits=_limits(doc["limits"]),
    )


def recall(profile: Path, text: str, *, name: str, source: str) -> SandboxProfile | None:
    """The remembered parse of exactly ``text``, if there is a trustworthy one."""
    data = read_own_cache(cache_path(profile), limit=MAX_BYTES)
    if data is None:
        return None
    try:
        doc = json.loads(data)
        if (
            type(doc) is not dict
            or doc.get("format") != FORMAT
            or doc.get("code") != fingerprint()
            or doc.get("name") != name
            or doc.get("source") != source
            or doc.get("text") != text
        ):
            return None
        return from_json(doc.get("profile"), name=name, source=source)
    except (ValueError, KeyError, TypeError, IndexError):
        return None


def remember(profile: Path, text: str, parsed: SandboxProfile) -> None:
    """Keep ``parsed`` as the parse of ``text`` (best effort: errors are ignored)."""
    doc = {
        "format": FORMAT,
        "code": fingerprint(),
        "name": parsed.name,
        "source": parsed.source,
        "text": text,
        "profile": to_json(parsed),
    }
    write_own_cache(cache_path(profile), json.dumps(doc, separators=(",", ":")).encode())
