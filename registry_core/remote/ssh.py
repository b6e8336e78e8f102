"""Building and running ``ssh`` command lines with the options ollie-remote insists on.

OpenSSH is the only transport: the user's own ``~/.ssh/config``, agent and
``known_hosts`` apply.  Every command line starts with

* ``-o BatchMode=yes``: never a password or passphrase prompt (keys or agent only);
* ``-o StrictHostKeyChecking=yes``: an unknown or changed host key is an error.

ssh keeps the *first* value it is given for an option, and these come before
anything else (the extra options of ``$OLLIE_REMOTE_SSH_OPTIONS`` or
``--ssh-option``, and the user's config files), so nothing can weaken them.
"""

from __future__ import annotations

import re
import shlex
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from registry_core.errors import HostKeyError, RemoteError, SshAuthError, SshError
from registry_core.trusted import trusted_program

SSH_OPTIONS_ENV = "OLLIE_REMOTE_SSH_OPTIONS"
SAFE_OPTIONS: tuple[str, ...] = ("-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes")
# Forward connections: our own TCP connection (never a multiplexing master, whose
# pid would not be the one we record), kept alive, failing loudly when the
# forward cannot be set up.
FORWARD_OPTIONS: tuple[str, ...] = (
    "-o",
    "ControlMaster=no",
    "-o",
    "ControlPath=none",
    "-o",
    "ExitOnForwardFailure=yes",
    "-o",
    "StreamLocalBindUnlink=yes",
    "-o",
    "ServerAliveInterval=15",
    "-o",
    "ServerAliveCountMax=3",
)
# Defaults that extra options may override (they come after them; ssh keeps the first).
DEFAULT_OPTIONS: tuple[str, ...] = ("-o", "ConnectTimeout=30")
# A host as ssh takes it: an alias, a name, an IP literal, optionally user@.
# Never starting with "-" (it would be read as an option); no "/" (state file
# names) and no whitespace.
_HOST_RE = re.compile(r"^(?:[A-Za-z0-9_][A-Za-z0-9_.+-]*@)?[A-Za-z0-9_\[][A-Za-z0-9_.:%\[\]-]*$")
_MAX_HOST = 253
_HOST_KEY_SIGNS = (
    "Host key verification failed",
    "REMOTE HOST IDENTIFICATION HAS CHANGED",
    "host key is known for",
    "No matching host key",
)
_AUTH_SIGNS = ("Permission denied", "Too many authentication failures")
_SSH_FAILURE = 255


def check_host(host: str) -> str:
    """``host`` if it is a usable ssh destination, else :class:`RemoteError`."""
    if not host or len(host) > _MAX_HOST or not _HOST_RE.fullmatch(host) or ".." in host:
        raise RemoteError(
            f"not a usable host name: {host!r} (an ssh alias, name or address, optionally user@)"
        )
    return host


def extra_options(env: Mapping[str, str], cli: Iterable[str] = ()) -> tuple[str, ...]:
    """Extra ssh arguments: ``$OLLIE_REMOTE_SSH_OPTIONS`` then each ``--ssh-option``,
    shell-split (so ``--ssh-option "-p 2222"`` gives two words)."""
    words: list[str] = []
    for text in (env.get(SSH_OPTIONS_ENV, ""), *cli):
        try:
            words.extend(shlex.split(text))
        except ValueError as exc:
            raise RemoteError(f"cannot parse ssh options {text!r}: {exc}") from exc
    return tuple(words)


def last_words(stderr: str, limit: int = 6) -> str:
    """The meaningful end of an ssh error output (debug chatter removed)."""
    lines = [
        line.strip()
        for line in stderr.replace("\r", "\n").splitlines()
        if line.strip() and not line.startswith(("debug1:", "debug2:", "debug3:", "OpenSSH_"))
    ]
    return "\n".join(lines[-limit:])


def classify_failure(host: str, returncode: int | None, stderr: str, what: str) -> SshError:
    """The error for a failed ssh run: host key and authentication problems get their
    own class and a message that says what to do."""
    words = last_words(stderr)
    if any(sign in stderr for sign in _HOST_KEY_SIGNS):
        return HostKeyError(
            f"{what}: the host key of {host} is not known here (or it changed). ollie-remote "
            f"never accepts host keys blindly: connect once with plain `ssh {host}`, check the "
            "key fingerprint and accept it, then try again."
            + (f"\nssh said: {words}" if words else ""),
            returncode,
            stderr,
        )
    if any(sign in stderr for sign in _AUTH_SIGNS):
        return SshAuthError(
            f"{what}: {host} refused our keys. ollie-remote never asks for passwords "
            "(BatchMode): load a key into your ssh agent or name one in ~/.ssh/config, and "
            f"check that `ssh -o BatchMode=yes {host} true` works."
            + (f"\nssh said: {words}" if words else ""),
            returncode,
            stderr,
        )
    detail = words or f"exit status {returncode}"
    return SshError(f"{what}: {detail}", returncode, stderr)


@dataclass(frozen=True)
class SshTarget:
    """One remote host and how to reach it."""

    host: str
    extra: tuple[str, ...] = ()
    # The ssh program by absolute path; None: the system's (registry_core.trusted),
    # never PATH, whose first entries may be a project directory a tool can write.
    ssh: str | None = None

    def __post_init__(self) -> None:
        check_host(self.host)

    @property
    def program(self) -> str:
        """The ssh to run; raises UntrustedProgramError when there is no trusted one."""
        return self.ssh if self.ssh is not None else trusted_program("ssh")

    def base(self) -> list[str]:
        """ssh and its options, without the destination (also rsync's ``-e``)."""
        return [self.program, *SAFE_OPTIONS, *self.extra]

    def command(self, script: str) -> list[str]:
        """Run the POSIX shell ``script`` on the host (no tty, no forwarding)."""
        return [
            self.program,
            *SAFE_OPTIONS,
            "-T",
            "-o",
            "ClearAllForwardings=yes",
            *self.extra,
            *DEFAULT_OPTIONS,
            "--",
            self.host,
            script,
        ]

    def forward(self, remote_socket: str, local_socket: str, *, verbose: bool = True) -> list[str]:
        """``ssh -N -R remote:local HOST``: the remote socket reaches our local one."""
        for path in (remote_socket, local_socket):
            if not path.startswith("/") or ":" in path or any(ch.isspace() for ch in path):
                raise RemoteError(
                    f"socket path {path!r} must be absolute, without ':' or whitespace"
                )
        return [
            self.program,
            *SAFE_OPTIONS,
            *FORWARD_OPTIONS,
            *(["-v"] if verbose else []),
            *self.extra,
            *DEFAULT_OPTIONS,
            "-N",
            "-T",
            "-R",
            f"{remote_socket}:{local_socket}",
            "--",
            self.host,
        ]

    def rsync_shell(self) -> str:
        """The ``rsync -e`` value: rsync splits it on spaces and honours quotes
        (a doubled quote inside quotes is a literal one), not backslashes."""
        return " ".join(_rsync_quote(word) for word in [*self.base(), "-T"])

    def run(
        self,
        script: str,
        *,
        what: str,
        input: bytes | None = None,
        timeout: float = 120.0,
    ) -> subprocess.CompletedProcess[bytes]:
        """Run ``script``; an ssh failure (exit 255) raises the classified error.

        The script's own non-zero exit is returned, not raised (callers decide)."""
        argv = self.command(script)
        try:
            result = subprocess.run(
                argv,
                input=input,
                stdin=None if input is not None else subprocess.DEVNULL,
                capture_output=True,
                timeout=timeout,
                check=False,
            )
        except FileNotFoundError as exc:
            raise RemoteError(f"{self.program} is not installed (OpenSSH client)") from exc
        except subprocess.TimeoutExpired as exc:
            raise SshError(f"{what}: no answer from {self.host} within {timeout:g} s") from exc
        if result.returncode == _SSH_FAILURE:
            stderr = result.stderr.decode("utf-8", "replace")
            raise classify_failure(self.host, result.returncode, stderr, what)
        return result


def _rsync_quote(word: str) -> str:
    if word and not re.search(r"[\s'\"]", word):
        return word
    return "'" + word.replace("'", "''") + "'"


def sh_quote_path(path: str) -> str:
    """A remote path for a POSIX shell: ``~/x`` becomes ``"$HOME"/'x'``."""
    if path == "~":
        return '"$HOME"'
    if path.startswith("~/"):
        rest = path[2:]
        return '"$HOME"/' + shlex.quote(rest) if rest else '"$HOME"'
    return shlex.quote(path)


def sh_join(words: Sequence[str]) -> str:
    return " ".join(shlex.quote(w) for w in words)
