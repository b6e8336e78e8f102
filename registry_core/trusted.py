"""Programs the trusted side runs: found in fixed system directories only.

Everything Ollie runs outside the sandbox on a person's behalf -- ``bwrap``,
``sudo``, ``bash``, ``kdialog``, ``zenity``, the interpreter of a pinned exec --
is looked up here, never on ``PATH``: an agent's ``PATH`` commonly starts with
a directory of the project (``.venv/bin``, ``node_modules/.bin``), which a
sandboxed tool can write.  A program is accepted only when its real file and
every directory above it (and above the name it was found under) belong to
root and are writable by no one else, so nothing a user-level process can
write decides what runs.
"""

from __future__ import annotations

import os
import stat

from registry_core.errors import UntrustedProgramError

SYSTEM_DIRS: tuple[str, ...] = ("/usr/bin", "/bin", "/usr/sbin", "/sbin", "/usr/local/bin")
"""Where trusted programs are looked for, in this order."""

SYSTEM_PATH = ":".join(SYSTEM_DIRS)
"""``PATH`` for processes the trusted side starts outside the sandbox."""

PACKAGES: dict[str, str] = {
    "bwrap": "bubblewrap",
    "sudo": "sudo",
    "bash": "bash",
    "kdialog": "kdialog",
    "zenity": "zenity",
    "python3": "python3",
    "ssh": "openssh-client",
    "rsync": "rsync",
}


def _untrusted_reason(path: str, info: os.stat_result, what: str) -> str | None:
    if info.st_uid != 0:
        return f"{what} {path} is not owned by root"
    # A sticky directory (/tmp) lets nobody but root rename or remove root's entries
    # in it; the entry below is checked in its turn.
    sticky_dir = stat.S_ISDIR(info.st_mode) and info.st_mode & stat.S_ISVTX
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and not sticky_dir:
        return f"{what} {path} is writable by others than root"
    return None


def check_trusted(path: str, *, executable: bool = True) -> str | None:
    """Why ``path`` (absolute) cannot be trusted, or ``None`` when it can.

    The real file must be a regular file (executable, unless ``executable`` is
    false: a shared library); it and each directory above it -- those of the
    name given and those of the name it resolves to -- must be root's and
    writable by root alone.
    """
    if not os.path.isabs(path):
        return f"{path} is not an absolute path"
    real = os.path.realpath(path)
    try:
        info = os.stat(real)
    except OSError as exc:
        return f"{path}: {exc.strerror or exc}"
    if not stat.S_ISREG(info.st_mode) or (executable and not info.st_mode & 0o111):
        return f"{real} is not {'an executable' if executable else 'a regular'} file"
    reason = _untrusted_reason(real, info, "the file")
    if reason:
        return reason
    dirs: dict[str, None] = {}
    for start in (os.path.dirname(os.path.abspath(path)), os.path.dirname(real)):
        current = start
        while True:
            dirs[current] = None
            parent = os.path.dirname(current)
            if parent == current:
                break
            current = parent
    for directory in dirs:
        try:
            dir_info = os.stat(directory)
        except OSError as exc:
            return f"{directory}: {exc.strerror or exc}"
        reason = _untrusted_reason(directory, dir_info, "the directory")
        if reason:
            return reason
    return None


def library_dirs() -> tuple[str, ...]:
    """The system's shared-library directories (this architecture's first)."""
    import sysconfig  # only where a library is looked up (a seccomp filter compiled)

    arch = sysconfig.get_config_var("MULTIARCH") or ""
    dirs = [f"/usr/lib/{arch}", f"/lib/{arch}"] if arch else []
    return (*dirs, "/usr/lib64", "/lib64", "/usr/lib", "/lib")


def find_trusted_library(soname: str) -> str | None:
    """The shared library ``soname`` (``libseccomp.so.2``) of a system library
    directory whose file and directories are root's alone, or ``None``.

    Never ``ctypes.util.find_library``: when the loader's cache lacks a library
    it runs ``gcc`` and ``ld`` from ``PATH``, which may start with a directory a
    sandboxed tool can write."""
    for directory in library_dirs():
        candidate = os.path.join(directory, soname)
        if os.path.lexists(candidate) and check_trusted(candidate, executable=False) is None:
            return candidate
    return None


def find_trusted(name: str) -> str | None:
    """The trusted program called ``name`` (its absolute path in a system directory),
    or ``None`` when no system directory holds one that can be trusted."""
    return _find(name)[0]


def trusted_program(name: str, package: str | None = None) -> str:
    """Like :func:`find_trusted`, but raise :class:`UntrustedProgramError` naming the
    program, what was found and the package to install."""
    found, reason = _find(name)
    if found is None:
        raise UntrustedProgramError(name, reason, package or PACKAGES.get(name))
    return found


def _find(name: str) -> tuple[str | None, str]:
    if not name or "/" in name:
        return None, f"{name!r} is not a program name"
    reasons: list[str] = []
    for directory in SYSTEM_DIRS:
        candidate = os.path.join(directory, name)
        if not os.path.lexists(candidate):
            continue
        reason = check_trusted(candidate)
        if reason is None:
            return candidate, ""
        reasons.append(reason)
    if reasons:
        return None, "found but not trusted (" + "; ".join(dict.fromkeys(reasons)) + ")"
    return None, f"not installed in {', '.join(SYSTEM_DIRS)}"


__all__ = [
    "PACKAGES",
    "SYSTEM_DIRS",
    "SYSTEM_PATH",
    "check_trusted",
    "find_trusted",
    "trusted_program",
]
