"""Facts about a host that ``match`` conditions and executable resolution ask about.

One :class:`HostFacts` is built per scan.  ``$PATH`` directories are listed
once (lazily, on the first lookup) so thousands of ``binary`` conditions cost
a dictionary lookup each instead of a ``stat`` per directory.

The same class answers "What if…" questions for another host: every fact can
be overridden (os, arch, env, PATH, binaries and files that exist or not),
and ``simulated`` says the answers are not this machine's.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Mapping
from pathlib import Path

from registry_core.registry.model import Condition, ConditionResult

_GO_ARCH = {
    "x86_64": "amd64",
    "amd64": "amd64",
    "aarch64": "arm64",
    "arm64": "arm64",
    "i386": "386",
    "i486": "386",
    "i586": "386",
    "i686": "386",
    "x86": "386",
    "armv6l": "arm",
    "armv7l": "arm",
    "armv8l": "arm",
    "arm": "arm",
    "riscv64": "riscv64",
    "ppc64le": "ppc64le",
    "ppc64": "ppc64",
    "s390x": "s390x",
    "mips64": "mips64",
    "loongarch64": "loong64",
}


def go_os(system: str | None = None) -> str:
    """Go's ``runtime.GOOS`` name for a ``platform.system()`` value (``uname -s``)."""
    return (system if system is not None else os.uname().sysname).lower()


def go_arch(machine: str | None = None) -> str:
    """Go's ``runtime.GOARCH`` name for a ``platform.machine()`` value (``uname -m``)."""
    raw = (machine if machine is not None else os.uname().machine).lower()
    return _GO_ARCH.get(raw, raw)


def is_executable_file(path: str) -> bool:
    """A regular file (after symlinks) with an execute bit this process may use."""
    try:
        st = os.stat(path)
    except OSError:
        return False
    return stat.S_ISREG(st.st_mode) and os.access(path, os.X_OK)


class HostFacts:
    """What this (or a simulated) host looks like. Built once per scan.

    ``os_name``, ``arch`` and ``env`` default to this host's; the "what if"
    overrides (``extra_binaries``: name -> path of a binary that exists on the
    simulated host, ``missing_binaries``: names of binaries that do not,
    ``present_files`` / ``absent_files``: paths that do / do not exist there)
    default to none.
    """

    def __init__(
        self,
        os_name: str | None = None,
        arch: str | None = None,
        env: Mapping[str, str] | None = None,
        simulated: bool = False,
        extra_binaries: Mapping[str, str] | None = None,
        missing_binaries: frozenset[str] = frozenset(),
        present_files: frozenset[str] = frozenset(),
        absent_files: frozenset[str] = frozenset(),
    ) -> None:
        self.os_name = go_os() if os_name is None else os_name
        self.arch = go_arch() if arch is None else arch
        self.env: Mapping[str, str] = dict(os.environ) if env is None else env
        self.simulated = simulated
        self.extra_binaries: Mapping[str, str] = extra_binaries or {}
        self.missing_binaries = missing_binaries
        self.present_files = present_files
        self.absent_files = absent_files
        self._index: dict[str, list[str]] | None = None
        self._found: dict[str, str | None] = {}
        # Answers to ``match`` conditions, filled by the evaluator: tools share
        # conditions ("binary journalctl"), and one scan asks each question once.
        self.condition_memo: dict[Condition, ConditionResult] = {}

    def __repr__(self) -> str:
        return (
            f"HostFacts(os_name={self.os_name!r}, arch={self.arch!r}, simulated={self.simulated!r})"
        )

    @property
    def path_dirs(self) -> tuple[str, ...]:
        return tuple(d for d in self.env.get("PATH", "").split(":") if d)

    def _path_index(self) -> dict[str, list[str]]:
        if self._index is None:
            index: dict[str, list[str]] = {}
            for directory in self.path_dirs:
                try:
                    names: Iterable[str] = os.listdir(directory)
                except OSError:
                    continue
                for name in names:
                    index.setdefault(name, []).append(directory)
            self._index = index
        return self._index

    def find_binary(self, name: str) -> str | None:
        """First executable called ``name`` on ``$PATH`` (like ``exec.LookPath``)."""
        if name in self.extra_binaries:
            return self.extra_binaries[name]
        if name in self.missing_binaries:
            return None
        if name in self._found:
            return self._found[name]
        found = None
        for directory in self._path_index().get(name, ()):
            candidate = os.path.join(directory, name)
            if is_executable_file(candidate):
                found = str(Path(candidate))  # "/usr/bin/" on PATH: no "//" in the answer
                break
        self._found[name] = found
        return found

    def executable_at(self, path: str) -> bool:
        if path in self.absent_files:
            return False
        if path in self.present_files:
            return True
        return is_executable_file(path)

    def file_exists(self, path: str) -> bool:
        if path in self.absent_files:
            return False
        if path in self.present_files:
            return True
        return os.path.exists(path)

    def env_value(self, name: str) -> str:
        return self.env.get(name, "")

    def describe(self) -> dict[str, object]:
        return {
            "os": self.os_name,
            "arch": self.arch,
            "simulated": self.simulated,
            "path": list(self.path_dirs),
        }
