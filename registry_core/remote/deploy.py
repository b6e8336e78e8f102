"""``ollie-remote deploy``: copy a tools directory to another host over ssh.

What is copied: every ``*.meta`` of the (flat) tools directory, the file named
like each tool beside it (its co-located executable), and every file of the
directory that a ``cmd`` (top level or a variant) names.  Modes are kept,
symlinks are copied as the files they point to.

Deletion is manifest-based: the remote directory holds ``.ollie-deployed``,
the names of the files the last deploy copied.  A name in the old manifest
that is not copied any more is removed there; files that deploy never copied
(the remote user's own tools) are never touched.

Transport: ``rsync`` over ssh when both ends have it (``--files-from``,
never ``--delete``), else a tar stream into ``ssh HOST tar -x``.  Then, when
``ollie-tools`` is installed there, the remote registry's view
(``ollie-tools list --all --json``) is fetched: variants resolve against the
remote host, not this one.
"""

from __future__ import annotations

import io
import json
import os
import re
import stat
import subprocess
import tarfile
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from registry_core.errors import RemoteError
from registry_core.remote.ssh import SshTarget, classify_failure, sh_join, sh_quote_path
from registry_core.safe_open import read_regular
from registry_core.trusted import find_trusted, trusted_program

MANIFEST = ".ollie-deployed"
DEFAULT_REMOTE_PATH = "~/.config/ollie/tools"
_NAME_RE = re.compile(r"^[A-Za-z0-9_+-][A-Za-z0-9_.+-]*$")
_REMOTE_PATH_RE = re.compile(r"^[A-Za-z0-9_./~+-]+$")
_MAX_META = 1024 * 1024


class Method(StrEnum):
    AUTO = "auto"
    RSYNC = "rsync"
    TAR = "tar"


def safe_name(name: str) -> bool:
    """A plain file name inside the tools directory (no path, no dot-file, no '..')."""
    return bool(_NAME_RE.fullmatch(name)) and name not in (".", "..") and name != MANIFEST


def check_remote_path(path: str) -> str:
    if not path or not _REMOTE_PATH_RE.fullmatch(path) or ".." in path.split("/"):
        raise RemoteError(
            f"remote path {path!r}: use letters, digits and _ . / ~ + - only (absolute,"
            " relative to the remote home, or ~/...)"
        )
    if path.startswith("~") and not (path == "~" or path.startswith("~/")):
        raise RemoteError(f"remote path {path!r}: ~user/ is not supported")
    return path


def _cmds(meta: Path) -> list[str]:
    """Every ``cmd`` string in a ``.meta`` (top level and variants); [] if unreadable."""
    try:
        obj = json.loads(read_regular(meta, limit=_MAX_META, follow_symlinks=True))
    except (OSError, ValueError, RecursionError):
        return []
    if not isinstance(obj, dict):
        return []
    found = [obj.get("cmd")]
    variants = obj.get("variants")
    if isinstance(variants, list):
        found.extend(v.get("cmd") for v in variants if isinstance(v, dict))
    return [c for c in found if isinstance(c, str)]


def select_files(tools_dir: Path) -> list[str]:
    """The names deploy copies from ``tools_dir`` (sorted)."""
    try:
        names = set(os.listdir(tools_dir))
    except OSError as exc:
        raise RemoteError(f"cannot read the tools directory {tools_dir}: {exc.strerror}") from exc

    def regular(name: str) -> bool:
        try:
            return stat.S_ISREG(os.stat(tools_dir / name).st_mode)
        except OSError:
            return False

    chosen: set[str] = set()
    for name in names:
        if not name.endswith(".meta") or not safe_name(name) or not regular(name):
            continue
        chosen.add(name)
        tool = name[: -len(".meta")]
        if tool in names and safe_name(tool) and regular(tool):
            chosen.add(tool)
        for cmd in _cmds(tools_dir / name):
            if "/" not in cmd and cmd in names and safe_name(cmd) and regular(cmd):
                chosen.add(cmd)
    return sorted(chosen)


def parse_manifest(text: str) -> list[str]:
    """The names of a manifest (one per line); unsafe entries are ignored."""
    return [line.strip() for line in text.splitlines() if safe_name(line.strip())]


def manifest_text(names: Iterable[str]) -> str:
    return "".join(f"{name}\n" for name in sorted(set(names)))


def stale_files(previous: Iterable[str], current: Iterable[str]) -> list[str]:
    """Names deployed last time and not any more: only these are removed remotely."""
    keep = set(current)
    return sorted({name for name in previous if safe_name(name) and name not in keep})


def tar_stream(tools_dir: Path, names: Sequence[str]) -> bytes:
    """An uncompressed tar of ``names`` (symlinks followed, modes kept, owner-less)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name in names:
            path = tools_dir / name
            st = os.stat(path)
            info = tarfile.TarInfo(name)
            info.size = st.st_size
            info.mode = stat.S_IMODE(st.st_mode)
            info.mtime = int(st.st_mtime)
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            with open(path, "rb") as fh:
                tar.addfile(info, fh)
    return buffer.getvalue()


@dataclass
class Probe:
    """What the remote side has (one ssh round trip)."""

    rsync: bool = False
    ollie_tools: str = ""
    manifest: list[str] = field(default_factory=list)


_PROBE_MARK = "--ollie-manifest--"


def _probe_script(remote_dir: str, ollie_tools: str | None) -> str:
    tools_probe = (
        f"t={sh_quote_path(ollie_tools)}; [ -x \"$t\" ] || t=''"
        if ollie_tools
        else "t=$(command -v ollie-tools 2>/dev/null || true)\n"
        'if [ -z "$t" ] && [ -x "$HOME/.local/bin/ollie-tools" ]; then '
        't="$HOME/.local/bin/ollie-tools"; fi'
    )
    return f"""set -e
d={sh_quote_path(remote_dir)}
mkdir -p -- "$d"
cd -- "$d"
printf 'rsync=%s\\n' "$(command -v rsync 2>/dev/null || true)"
{tools_probe}
printf 'ollie_tools=%s\\n' "$t"
printf '%s\\n' {_PROBE_MARK}
cat ./{MANIFEST} 2>/dev/null || true
"""


def parse_probe(text: str) -> Probe:
    head, _, manifest = text.partition(_PROBE_MARK + "\n")
    probe = Probe(manifest=parse_manifest(manifest))
    for line in head.splitlines():
        key, _, value = line.partition("=")
        if key == "rsync":
            probe.rsync = bool(value.strip())
        elif key == "ollie_tools":
            probe.ollie_tools = value.strip()
    return probe


def remote_tools_script(
    ollie_tools: str, args: Sequence[str], tools_path: str | None = None
) -> str:
    """Run the remote ``ollie-tools ARGS`` (found at ``ollie_tools``, or on PATH, or in
    ``~/.local/bin``), with ``OLLIE_TOOLS_PATH`` set when ``tools_path`` is given."""
    find = (
        f"t={sh_quote_path(ollie_tools)}"
        if ollie_tools
        else "t=$(command -v ollie-tools 2>/dev/null || true)\n"
        'if [ -z "$t" ] && [ -x "$HOME/.local/bin/ollie-tools" ]; then '
        't="$HOME/.local/bin/ollie-tools"; fi\n'
        'if [ -z "$t" ]; then echo "ollie-tools is not installed on this host" >&2; exit 127; fi'
    )
    env = (
        f"OLLIE_TOOLS_PATH={sh_quote_path(tools_path)}; export OLLIE_TOOLS_PATH\n"
        if tools_path
        else ""
    )
    return f'{find}\n{env}exec "$t" {sh_join(args)}\n'


@dataclass
class DeployResult:
    host: str
    remote_path: str
    method: Method
    copied: list[str]
    removed: list[str]
    ollie_tools: str = ""
    tools: list[dict[str, Any]] | None = None
    list_error: str = ""


class Deployer:
    """One deploy of ``tools_dir`` to ``target`` (see the module docstring)."""

    def __init__(
        self,
        target: SshTarget,
        tools_dir: Path,
        remote_path: str = DEFAULT_REMOTE_PATH,
        *,
        method: Method = Method.AUTO,
        remote_ollie_tools: str | None = None,
        timeout: float = 300.0,
    ) -> None:
        self.target = target
        self.tools_dir = tools_dir
        self.remote_path = check_remote_path(remote_path)
        self.method = method
        self.remote_ollie_tools = remote_ollie_tools
        self.timeout = timeout

    def run(self) -> DeployResult:
        if not self.tools_dir.is_dir():
            raise RemoteError(f"{self.tools_dir} is not a directory")
        names = select_files(self.tools_dir)
        probe = self.probe()
        method = self._choose(probe)
        if method is Method.RSYNC:
            self._rsync(names)
        else:
            self._tar(names)
        removed = stale_files(probe.manifest, names)
        self._finish(removed, names)
        result = DeployResult(
            self.target.host,
            self.remote_path,
            method,
            names,
            removed,
            ollie_tools=probe.ollie_tools,
        )
        if probe.ollie_tools:
            self._list(result)
        return result

    def probe(self) -> Probe:
        script = _probe_script(self.remote_path, self.remote_ollie_tools)
        out = self.target.run(script, what=f"preparing {self.remote_path} on {self.target.host}")
        if out.returncode != 0:
            err = out.stderr.decode("utf-8", "replace").strip()
            raise RemoteError(
                f"cannot create {self.remote_path} on {self.target.host}: {err or out.returncode}"
            )
        return parse_probe(out.stdout.decode("utf-8", "replace"))

    def _choose(self, probe: Probe) -> Method:
        local = find_trusted("rsync") is not None
        if self.method is Method.RSYNC:
            if not (local and probe.rsync):
                where = "here" if not local else f"on {self.target.host}"
                raise RemoteError(f"--method rsync: rsync is not installed {where}")
            return Method.RSYNC
        if self.method is Method.TAR:
            return Method.TAR
        return Method.RSYNC if local and probe.rsync else Method.TAR

    def _destination(self) -> str:
        path = self.remote_path
        if path == "~":
            path = "."
        elif path.startswith("~/"):
            path = path[2:] or "."
        return f"{self.target.host}:{path.rstrip('/') or '/'}/"

    def _rsync(self, names: Sequence[str]) -> None:
        if not names:
            return
        argv = [
            trusted_program("rsync"),
            "--perms",
            "--times",
            "--copy-links",
            "--from0",
            "--files-from=-",
            "-e",
            self.target.rsync_shell(),
            "--",
            f"{self.tools_dir}/",
            self._destination(),
        ]
        listing = b"".join(name.encode() + b"\0" for name in names)
        try:
            result = subprocess.run(
                argv, input=listing, capture_output=True, timeout=self.timeout, check=False
            )
        except subprocess.TimeoutExpired as exc:
            raise RemoteError(f"rsync to {self.target.host} timed out") from exc
        if result.returncode != 0:
            stderr = result.stderr.decode("utf-8", "replace")
            raise classify_failure(self.target.host, result.returncode, stderr, "rsync")

    def _tar(self, names: Sequence[str]) -> None:
        if not names:
            return
        script = (
            f"set -e\ncd -- {sh_quote_path(self.remote_path)}\n"
            "umask 022\ntar --no-same-owner -xpf -\n"
        )
        data = tar_stream(self.tools_dir, names)
        out = self.target.run(
            script, what=f"copying to {self.target.host}", input=data, timeout=self.timeout
        )
        if out.returncode != 0:
            err = out.stderr.decode("utf-8", "replace").strip()
            raise RemoteError(f"tar on {self.target.host} failed: {err or out.returncode}")

    def _finish(self, removed: Sequence[str], names: Sequence[str]) -> None:
        """Remove what is no longer deployed (regular files and symlinks only) and write
        the new manifest (its content arrives on stdin)."""
        removal = ""
        if removed:
            removal = (
                f"for f in {sh_join(removed)}; do\n"
                '  if [ -f "$f" ] || [ -L "$f" ]; then rm -f -- "$f"; fi\n'
                "done\n"
            )
        script = (
            f"set -e\ncd -- {sh_quote_path(self.remote_path)}\n{removal}"
            f"cat > ./{MANIFEST}.tmp\nmv -f ./{MANIFEST}.tmp ./{MANIFEST}\n"
        )
        out = self.target.run(
            script,
            what=f"updating {MANIFEST} on {self.target.host}",
            input=manifest_text(names).encode(),
        )
        if out.returncode != 0:
            err = out.stderr.decode("utf-8", "replace").strip()
            raise RemoteError(f"cleaning up on {self.target.host} failed: {err}")

    def _list(self, result: DeployResult) -> None:
        script = remote_tools_script(
            result.ollie_tools, ["list", "--all", "--json"], self.remote_path
        )
        out = self.target.run(script, what=f"ollie-tools list on {self.target.host}")
        if out.returncode != 0:
            result.list_error = out.stderr.decode("utf-8", "replace").strip() or str(out.returncode)
            return
        try:
            tools = json.loads(out.stdout)
        except ValueError as exc:
            result.list_error = f"ollie-tools list printed no JSON: {exc}"
            return
        if isinstance(tools, list):
            result.tools = [t for t in tools if isinstance(t, dict)]
        else:
            result.list_error = "ollie-tools list printed no list"


def deployed_at() -> float:
    return time.time()
