"""The one error hierarchy of ``registry_core``.

Every error this package raises on purpose derives from :class:`OllieError`
and carries the context a person needs to fix the problem (a path, a field,
a value).  Callers catch the narrowest class they can handle.
"""

from __future__ import annotations


class OllieError(Exception):
    """Base class of every error raised by registry_core."""


# --- registry -------------------------------------------------------------


class MetaError(OllieError):
    """A ``.meta`` file could not be used.

    ``path`` is the file, ``line``/``column`` are 1-based positions when the
    problem has one (JSON syntax errors), else ``None``.
    """

    def __init__(
        self, path: str, message: str, line: int | None = None, column: int | None = None
    ) -> None:
        self.path = path
        self.message = message
        self.line = line
        self.column = column
        super().__init__(self.location() + ": " + message)

    def location(self) -> str:
        if self.line is not None:
            return f"{self.path}:{self.line}:{self.column or 1}"
        return self.path


class ToolNotFoundError(OllieError):
    """No tool of that name is known to the registry."""

    def __init__(self, name: str) -> None:
        self.name = name
        super().__init__(f"no tool named {name!r}")


class ToolUnavailableError(OllieError):
    """The tool exists but cannot be used on this host (hidden or broken)."""

    def __init__(self, name: str, status: str, reason: str) -> None:
        self.name = name
        self.status = status
        self.reason = reason
        super().__init__(f"tool {name!r} is {status}: {reason}")


class ToolChangedError(OllieError):
    """A ``.meta`` changed after the registry snapshot was taken: load it again."""

    def __init__(self, path: str, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(f"{path} {reason} since the tool registry was loaded; reload it")


# --- dispatch ---------------------------------------------------------------


class DispatchError(OllieError):
    """A tool call could not be started or completed."""


class ArgumentsError(DispatchError):
    """The call's arguments do not satisfy the tool's ``args`` schema."""

    def __init__(self, tool: str, field: str, message: str) -> None:
        self.tool = tool
        self.field = field
        self.message = message
        super().__init__(f"{tool}: invalid argument {field}: {message}")


class ExecutableError(DispatchError):
    """The resolved executable is missing or not executable."""


class ExecutableChangedError(ExecutableError):
    """An elevated or sudo tool's file is not the one approved: it changed between the
    sha256 the broker approved and the pinned exec, which refused to run it
    (see :mod:`registry_core.pinned`)."""

    def __init__(self, tool: str, detail: str) -> None:
        self.tool = tool
        self.detail = detail
        super().__init__(f"{tool}: {detail}")


# --- sandbox ----------------------------------------------------------------


class UntrustedProgramError(OllieError):
    """A helper the trusted side runs (bwrap, sudo, bash, a dialog...) is missing from
    the system directories, or is there but could be replaced by someone other than root.

    ``program`` is the name looked for, ``reason`` what was found, ``package`` the
    distribution package that provides it (``None`` when not known).
    """

    def __init__(self, program: str, reason: str, package: str | None = None) -> None:
        self.program = program
        self.reason = reason
        self.package = package
        hint = f": install the '{package}' package" if package else ""
        super().__init__(f"{program}: {reason}{hint}")


class SandboxError(OllieError):
    """The sandbox could not be set up; the tool is never run unsandboxed."""


class ProfileError(SandboxError):
    """A sandbox profile file is invalid."""

    def __init__(self, path: str, message: str) -> None:
        self.path = path
        self.message = message
        super().__init__(f"{path}: {message}")


class ProtectedPathError(ProfileError):
    """A profile's writable rule lies at, above or inside one of Ollie's own places
    (its configuration, state, cache, runtime or tools directories, its installation):
    refused when the profile is loaded for a call (:mod:`registry_core.sandbox.protected`).

    ``origin`` is the key and line (``filesystem.rw, line 7``), ``template`` the value
    as written, ``rule_path`` what it expands to, ``relation`` "at", "above" or
    "inside", ``directory`` and ``what`` the protected place.
    """

    def __init__(
        self,
        *,
        profile: str,
        source: str,
        origin: str,
        template: str,
        rule_path: str,
        access: str,
        relation: str,
        directory: str,
        what: str,
    ) -> None:
        self.profile = profile
        self.origin = origin
        self.template = template
        self.rule_path = rule_path
        self.access = access
        self.relation = relation
        self.directory = directory
        self.what = what
        place = f"{what} ({directory})"
        where = {"at": f"is {place}", "above": f"is above {place}"}.get(
            relation, f"is inside {place}"
        )
        expanded = "" if template == rule_path else f", {rule_path}"
        super().__init__(
            source,
            f"sandbox profile {profile!r} grants {access} on {template!r} ({origin}{expanded}),"
            f" which {where}: a tool could change Ollie's own configuration,"
            " state or installation, and what it writes there runs outside the sandbox."
            " Remove or narrow that rule.",
        )


class LandlockUnavailableError(SandboxError):
    """The kernel offers no Landlock and the profile does not allow best effort."""


class NamespacesUnavailableError(SandboxError):
    """bubblewrap (the namespace builder) is missing and the profile does not allow best effort."""


class SeccompUnavailableError(SandboxError):
    """No seccomp filter can be built (libseccomp missing) and the profile does not
    allow best effort."""


class UnsafeWorkingDirectoryError(SandboxError):
    """A sandboxed call was asked to run in a directory it must not get write access to.

    ``cwd`` is the refused directory, ``reason`` what it is (``/``, the home
    directory, holding Ollie's configuration, ...).
    """

    def __init__(self, cwd: str, reason: str) -> None:
        self.cwd = cwd
        self.reason = reason
        super().__init__(
            f"refusing to run a sandboxed tool in {cwd}: it is {reason}, and a tool may "
            "write to its working directory; run the agent in a project directory "
            "(e.g. mkdir -p ~/work/project && cd ~/work/project)"
        )


class BrokerSocketExposedError(SandboxError):
    """A profile rule would make the broker socket's directory writable for the tool."""

    def __init__(
        self, profile: str, source: str, rule_path: str, access: str, origin: str, socket: str
    ) -> None:
        self.profile = profile
        self.source = source
        self.rule_path = rule_path
        self.access = access
        self.origin = origin
        self.socket = socket
        super().__init__(
            f"sandbox profile {profile!r} ({source}) grants {access} on {rule_path}"
            f" (from {origin}), which holds the elevation broker's socket {socket}:"
            " a tool could replace the socket and answer elevation requests itself."
            " Remove or narrow that rule, or move the socket (set XDG_RUNTIME_DIR,"
            " or OLLIE_ELEVATE_SOCKET to a path in a directory the profile does not make"
            " writable)."
        )


# --- elevation --------------------------------------------------------------


class ElevationError(OllieError):
    """Base of the elevation broker's errors."""


class ProtocolError(ElevationError):
    """A broker protocol message is malformed.

    ``code`` is the machine-readable error code sent on the wire.
    """

    def __init__(self, code: str, message: str) -> None:
        self.code = code
        self.message = message
        super().__init__(f"{code}: {message}")


class BrokerUnavailableError(ElevationError):
    """No elevation broker is listening (or it went away)."""


class ElevationDeniedError(ElevationError):
    """The request was denied (by the person, a policy, a timeout, ...)."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(f"elevation denied: {reason}")


class PolicyError(ElevationError):
    """The remembered-policy store is invalid or could not be written."""


# --- remote hosts (ollie-remote) ---------------------------------------------


class RemoteError(OllieError):
    """Deploying to or connecting with another host over SSH failed."""


class SshError(RemoteError):
    """An ``ssh`` (or ``rsync`` over ssh) command failed; ``stderr`` holds its last words."""

    def __init__(self, message: str, returncode: int | None = None, stderr: str = "") -> None:
        self.returncode = returncode
        self.stderr = stderr
        super().__init__(message)


class HostKeyError(SshError):
    """The remote host key is unknown or changed: never accepted blindly."""


class SshAuthError(SshError):
    """The remote host refused our keys (BatchMode: no password prompts)."""


class AgentActionError(OllieError):
    """Deciding an agent's own action (``ollie-approve``) failed before asking anybody."""


class ApproveRulesError(AgentActionError):
    """The ``ollie-approve`` rules file is unreadable or invalid (names file and field)."""


# --- network egress (registry_core.egress) -----------------------------------


class EgressError(OllieError):
    """Base of the egress proxy's errors (:mod:`registry_core.egress`)."""


class HostPatternError(EgressError):
    """An ``allow_hosts`` / ``deny_hosts`` entry is not a valid host pattern.

    ``text`` is the entry as written, ``reason`` what is wrong with it; the
    profile parser turns it into a :class:`ProfileError` naming key and line.
    """

    def __init__(self, text: str, reason: str) -> None:
        self.text = text
        self.reason = reason
        super().__init__(f"{text!r}: {reason}")


class EgressRequestError(EgressError):
    """A tool's request to the egress proxy is malformed or unsupported.

    ``status`` is the HTTP status and ``socks_code`` the SOCKS5 reply code the
    proxy answers with; ``reason`` is shown to the tool.
    """

    def __init__(self, reason: str, *, status: int = 400, socks_code: int = 0x01) -> None:
        self.reason = reason
        self.status = status
        self.socks_code = socks_code
        super().__init__(reason)


class EgressSetupError(EgressError):
    """The egress proxy could not start (its socket path unusable, ...)."""
