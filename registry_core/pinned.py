"""What runs outside the sandbox is what was approved: pinned bytes, a clean environment.

An elevated or sudo tool is never exec'ed by its path after a check: the file
could be replaced between the sha256 the broker approved and the ``execve``.
Instead the trusted side runs :data:`STUB` -- fixed code in the system's
``python3 -I`` (:func:`registry_core.trusted.trusted_program`), as the user for
an elevated tool and as root under ``sudo`` -- with the approved sha256 and
the path (:func:`pinned_argv`).  The stub opens the file once, refuses
anything but a regular file, reads it, hashes exactly the bytes it read and
refuses (exit :data:`EXIT_CHANGED`, a line starting :data:`CHANGED_MARK`) when
they are not the approved ones.  Otherwise it copies them into a sealed memfd
(``F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL``: nobody can change
them any more) and execs ``/proc/self/fd/N`` with :func:`clean_env`.  A script
works too: the kernel hands its interpreter ``/proc/self/fd/N``, which stays
open across the exec.  The broker checks this argv byte for byte, the stub's
code and the sha256 (docs/protocol.md, docs/security.md §12a).

The environment (:func:`clean_env`): ``PATH`` is :data:`~registry_core.trusted.SYSTEM_PATH`
(so ``#!/usr/bin/env python3`` finds the system's interpreter, never a
project's ``.venv/bin``), ``PYTHONSAFEPATH=1``, and every variable that makes
a program load code from elsewhere is dropped (:data:`UNSAFE_ENV`,
:data:`UNSAFE_ENV_PREFIXES`).  What a tool legitimately needs stays: ``HOME``,
``USER``, ``LANG``/``LC_*``, ``XDG_*``, ``DISPLAY``/``WAYLAND_DISPLAY``,
``TERM``, the ``PWD`` Ollie sets, Ollie's own variables.

What an approval still trusts: code the tool itself loads from a writable
directory (a module it imports from an absolute path, a file it sources).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from registry_core.trusted import SYSTEM_PATH, check_trusted

UNSAFE_ENV: frozenset[str] = frozenset(
    {
        # shells
        "BASH_ENV",
        "ENV",
        "SHELLOPTS",
        "BASHOPTS",
        "PS4",
        "IFS",
        "CDPATH",
        "PROMPT_COMMAND",
        # the C library and the dynamic loader
        "GCONV_PATH",
        "GLIBC_TUNABLES",
        "LOCPATH",
        "NLSPATH",
        "HOSTALIASES",
        "RESOLV_HOST_CONF",
        "MALLOC_CHECK_",
        "MALLOC_TRACE",
        # interpreters' search paths and start-up code
        "NODE_OPTIONS",
        "NODE_PATH",
        "NODE_REPL_EXTERNAL_MODULE",
        "RUBYOPT",
        "RUBYLIB",
        "GEM_HOME",
        "GEM_PATH",
        "LUA_INIT",
        "LUA_PATH",
        "LUA_CPATH",
        "TCLLIBPATH",
        "TCL_LIBRARY",
        "JAVA_TOOL_OPTIONS",
        "JDK_JAVA_OPTIONS",
        "_JAVA_OPTIONS",
        "CLASSPATH",
        "PHPRC",
        "PHP_INI_SCAN_DIR",
        "R_PROFILE",
        "R_PROFILE_USER",
        "R_ENVIRON",
        "R_ENVIRON_USER",
        # libraries that load plugins named by the environment
        "OPENSSL_CONF",
        "OPENSSL_ENGINES",
        "OPENSSL_MODULES",
        "GTK_MODULES",
        "GTK_PATH",
        "GIO_EXTRA_MODULES",
        "GST_PLUGIN_PATH",
        "GST_PLUGIN_SYSTEM_PATH",
        "QT_PLUGIN_PATH",
        "QT_QPA_PLATFORM_PLUGIN_PATH",
        "LIBGL_DRIVERS_PATH",
        "SUDO_ASKPASS",
    }
)
"""Variables dropped by :func:`clean_env`: each makes some program run or load code
from a place the variable names."""

UNSAFE_ENV_PREFIXES: tuple[str, ...] = (
    "LD_",  # LD_PRELOAD, LD_LIBRARY_PATH, LD_AUDIT...
    "PYTHON",  # PYTHONPATH, PYTHONSTARTUP, PYTHONHOME, PYTHONUSERBASE... (PYTHONSAFEPATH is set)
    "PERL",  # PERL5LIB, PERLLIB, PERL5OPT, PERL5DB...
    "GIT_",  # GIT_EXEC_PATH, GIT_SSH_COMMAND, GIT_CONFIG_*, GIT_ASKPASS... (exec hooks)
    "BASH_FUNC_",  # exported shell functions: a function named like a command replaces it
)
"""Every variable whose name starts so is dropped by :func:`clean_env`."""


def unsafe_name(name: str) -> bool:
    """Does :func:`clean_env` drop the variable ``name``?"""
    return name in UNSAFE_ENV or name.startswith(UNSAFE_ENV_PREFIXES)


def clean_env(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` for a process that runs outside the sandbox on an approval.

    ``PATH`` of the trusted system directories only, ``PYTHONSAFEPATH=1``, and
    none of :data:`UNSAFE_ENV` / :data:`UNSAFE_ENV_PREFIXES`; everything else kept.
    The same rules are written into :data:`STUB` (the last step before the exec).
    """
    clean = {k: v for k, v in env.items() if not unsafe_name(k) and k != "PATH"}
    clean["PATH"] = SYSTEM_PATH
    clean["PYTHONSAFEPATH"] = "1"
    return clean


EXIT_CHANGED = 126
"""The stub's exit status when it refuses: the file is not the approved one (or not a
regular file, or cannot be read or executed)."""

CHANGED_MARK = "ollie-pinned: refused: "
"""How the stub's refusal line on stderr starts."""

STUB = f"""\
import fcntl, hashlib, os, stat, sys
want, path = sys.argv[1], sys.argv[2]
def refuse(why):
    sys.stderr.write({CHANGED_MARK!r} + path + ': ' + why + '\\n')
    sys.exit({EXIT_CHANGED})
try:
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        refuse('not a regular file')
    chunks = []
    while chunk := os.read(fd, 1 << 20):
        chunks.append(chunk)
    data = b''.join(chunks)
except OSError as exc:
    refuse(exc.strerror or str(exc))
got = hashlib.sha256(data).hexdigest()
if got != want:
    refuse('its sha256 ' + got + ' is not the approved ' + want + ' (it changed); not run')
mfd = os.memfd_create('ollie-pinned', os.MFD_ALLOW_SEALING)
view = memoryview(data)
while view:
    view = view[os.write(mfd, view):]
fcntl.fcntl(mfd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_WRITE | fcntl.F_SEAL_GROW
            | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_SEAL)
drop, prefixes = {sorted(UNSAFE_ENV)!r}, {UNSAFE_ENV_PREFIXES!r}
env = {{k: v for k, v in os.environ.items()
       if k not in drop and not k.startswith(prefixes) and k != 'PATH'}}
env.update(PATH={SYSTEM_PATH!r}, PYTHONSAFEPATH='1')
try:
    os.execve('/proc/self/fd/%d' % mfd, [path], env)
except OSError as exc:
    refuse('cannot execute: ' + (exc.strerror or str(exc)))
"""
"""The fixed code of a pinned exec (``python3 -I -c STUB <sha256> <path>``)."""


def approved_argv(python: str, sha256: str, executable: str) -> list[str]:
    """What runs an approved ``executable`` whose bytes are ``sha256``.

    A file only root can change (it and every directory above it root's, see
    :func:`registry_core.trusted.check_trusted`) runs by its path, ``[executable]``:
    nobody a tool can be is able to swap it, and sudoers rules naming the path
    (``NOPASSWD: /opt/tools/x``) still match -- unless we are root ourselves: then
    "only root" includes the tool.  Any other file runs through the
    pinned exec (:func:`pinned_argv`).  The dispatcher and the broker both decide
    with this one function, so the broker's expectation is the dispatcher's argv.
    """
    if os.geteuid() != 0 and check_trusted(executable) is None:
        return [executable]
    return pinned_argv(python, sha256, executable)


def pinned_argv(python: str, sha256: str, executable: str) -> list[str]:
    """The argv that runs ``executable`` only if its bytes have ``sha256``.

    ``python`` is the absolute path of the trusted system ``python3``.
    """
    return [python, "-I", "-c", STUB, sha256, executable]


STUB_LABEL = "<Ollie's pinned exec: runs these bytes only>"
"""How the dialogs show the :data:`STUB` argument of a command line."""


def display_argv(argv: tuple[str, ...] | list[str]) -> list[str]:
    """``argv`` with the :data:`STUB` argument shown as :data:`STUB_LABEL` (dialogs, logs).

    Only an argument that *is* the stub, byte for byte, is replaced: anything
    else is shown as it is.
    """
    return [STUB_LABEL if arg == STUB else arg for arg in argv]


__all__ = [
    "CHANGED_MARK",
    "EXIT_CHANGED",
    "STUB",
    "STUB_LABEL",
    "UNSAFE_ENV",
    "UNSAFE_ENV_PREFIXES",
    "approved_argv",
    "clean_env",
    "display_argv",
    "pinned_argv",
    "unsafe_name",
]
