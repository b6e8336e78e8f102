"""The exec step: the last thing that runs inside the namespaces, before the tool.

Bubblewrap has set up the namespaces and the mount view; Landlock forbids
mount changes once applied, so it goes on here, as late as possible::

    python3 -I -S -c <this source> OPTIONS STATUS_FD RULESET_FD N [MASK PATH]... TOOL [ARG...]

It sets ``no_new_privs``, adds the ``N`` rules (the ``/proc`` ones: the fresh
procfs has inodes the parent could not name; ``MASK`` is decimal, already
masked for files; a missing ``PATH`` is skipped) to the per-call ruleset
``RULESET_FD`` (``-1``: no Landlock, best effort), restricts itself, closes
the ruleset (the tool must never hold it), writes one byte to ``STATUS_FD``
(the parent's proof that the sandbox is in place) and execs the tool.  Any
failure before that exits 125 with a message and never runs the tool.
``OPTIONS`` is ``-`` (none) or comma-separated ``KEY=VALUE`` pairs for the
step's other duties; an unknown key or a malformed pair fails closed.
``nproc``, ``data`` and ``cpu`` set the call's rlimits (tasks, bytes of data,
CPU seconds; soft = hard, but one more hard second of CPU
so the tool ends by ``SIGXCPU``) first thing: here, inside bwrap's fresh user
namespace, the kernel counts ``RLIMIT_NPROC`` against the tasks of this
namespace only, not every process the person runs.  ``keyctl`` (that system
call's number) makes the step join a new anonymous session keyring, so the
tool never possesses the dispatcher's.  ``cwd`` (``DEVICE:INODE``) is the
working directory the dispatcher pinned: the step refuses to run the tool
anywhere else.

This file is run by source (``-c``) under ``-I -S``: it imports only the
standard library and nothing of ``registry_core``.
"""

import ctypes
import os
import resource
import struct
import sys

_NO_NEW_PRIVS = 38
_ADD_RULE = 445
_RESTRICT_SELF = 446
_PATH_BENEATH = 1


def _fail(message: str) -> None:
    os.write(2, f"ollie sandbox: {message}\n".encode(errors="replace"))
    os._exit(125)


def _call(libc: ctypes.CDLL, number: int, *args: int) -> None:
    if libc.syscall(ctypes.c_long(number), *(ctypes.c_long(a) for a in args)) == -1:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))


_OPTION_KEYS: frozenset[str] = frozenset({"nproc", "data", "cpu", "keyctl", "cwd"})
_JOIN_SESSION_KEYRING = 1
_ENOSYS = 38
_RLIMITS = {
    "nproc": resource.RLIMIT_NPROC,
    "data": resource.RLIMIT_DATA,
    "cpu": resource.RLIMIT_CPU,
}


def parse_options(text: str) -> dict[str, str]:
    """``KEY=VALUE,...`` (or ``-``) into a dict; raise ValueError on anything else."""
    if text == "-":
        return {}
    options: dict[str, str] = {}
    for pair in text.split(","):
        key, sep, value = pair.partition("=")
        if not sep or key not in _OPTION_KEYS or key in options:
            raise ValueError(f"bad exec step option {pair!r}")
        options[key] = value
    return options


def set_limits(options: dict[str, str]) -> None:
    """Apply the ``nproc``/``data``/``cpu`` options as rlimits (never raised above a
    lower hard limit already in place)."""
    for key, which in _RLIMITS.items():
        if key not in options:
            continue
        value = int(options[key])
        if value < 1:
            raise ValueError(f"bad limit {key}={value}")
        hard = resource.getrlimit(which)[1]
        if hard != resource.RLIM_INFINITY:
            value = min(value, hard)
        # CPU: SIGXCPU at the limit (the call's status names it), SIGKILL a second later.
        grace = 1 if key == "cpu" and (hard == resource.RLIM_INFINITY or value < hard) else 0
        resource.setrlimit(which, (value, value + grace))


def fresh_keyring(libc: ctypes.CDLL, options: dict[str, str]) -> None:
    """``keyctl=N``: join a new anonymous session keyring (``N``: keyctl's number)."""
    if "keyctl" not in options:
        return
    try:
        _call(libc, int(options["keyctl"]), _JOIN_SESSION_KEYRING, 0)
    except OSError as exc:
        if exc.errno != _ENOSYS:  # a kernel without keyrings has nothing to hide
            raise


def check_cwd(options: dict[str, str]) -> None:
    """``cwd=DEVICE:INODE``: the working directory bwrap chdir'ed into must be the
    directory the dispatcher pinned, not whatever its path names now."""
    if "cwd" not in options:
        return
    here = os.stat(".")
    if f"{here.st_dev}:{here.st_ino}" != options["cwd"]:
        raise ValueError(
            f"the working directory is not the one that was checked "
            f"({here.st_dev}:{here.st_ino}, expected {options['cwd']})"
        )


def main(argv: list[str]) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    try:
        options = parse_options(argv[1])
        set_limits(options)
        fresh_keyring(libc, options)
        check_cwd(options)
        status, ruleset, count = int(argv[2]), int(argv[3]), int(argv[4])
        rules, tool = argv[5 : 5 + 2 * count], argv[5 + 2 * count :]
        if libc.prctl(_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
        if ruleset >= 0:
            for mask, path in zip(rules[::2], rules[1::2], strict=True):
                try:
                    path_fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
                except FileNotFoundError:
                    continue
                attr = ctypes.create_string_buffer(struct.pack("=Qi", int(mask), path_fd), 12)
                _call(libc, _ADD_RULE, ruleset, _PATH_BENEATH, ctypes.addressof(attr), 0)
                os.close(path_fd)
            _call(libc, _RESTRICT_SELF, ruleset, 0)
            os.close(ruleset)
        os.write(status, b"1")
        os.close(status)
        if not tool:
            raise ValueError("no tool to run")
    except (OSError, ValueError) as exc:
        _fail(f"cannot apply the sandbox: {exc}")
    try:
        os.execv(tool[0], tool)  # noqa: S606 - argv, never a shell
    except OSError as exc:
        os.write(2, f"{tool[0]}: {exc.strerror}\n".encode(errors="replace"))
        os._exit(127 if isinstance(exc, FileNotFoundError) else 126)


if __name__ == "__main__":
    main(sys.argv)
