"""Turn effective rules into a Landlock ruleset and a filtered environment.

``prepare`` builds the ruleset in the calling (parent) process and returns a
:class:`PreparedSandbox` whose ``preexec`` restricts a child::

    sandbox = cache.get(rules)  # or prepare(rules)
    subprocess.Popen(argv, env=sandbox_env(rules, env), preexec_fn=sandbox.preexec)

Fail-closed policy:

* no Landlock in the kernel → :class:`LandlockUnavailableError`, unless the
  profile says ``general.best_effort: true`` (then only ``no_new_privs``);
* a restriction the profile asks for that the kernel's ABI cannot enforce
  (TCP rules before ABI 4) → the same error unless ``best_effort``;
* hardening the profile does not mention (truncate before ABI 3, device
  ioctl before ABI 5, IPC scoping before ABI 6) is reported, not fatal.

When the ABI allows, children are always scoped: no signals to, and no
abstract Unix socket connections with, processes outside the sandbox.
"""

from __future__ import annotations

import fnmatch
from collections import OrderedDict
from collections.abc import Iterable, Mapping

from registry_core.errors import LandlockUnavailableError, SandboxError
from registry_core.sandbox import landlock
from registry_core.sandbox.landlock import FsAccess, NetAccess, PreparedSandbox, RulesetBuilder
from registry_core.sandbox.profiles import Access, NetworkMode
from registry_core.sandbox.report import Gap
from registry_core.sandbox.rules import EffectiveRules

_READ = FsAccess.READ_FILE | FsAccess.READ_DIR
_WRITE = (
    FsAccess.WRITE_FILE
    | FsAccess.REMOVE_DIR
    | FsAccess.REMOVE_FILE
    | FsAccess.MAKE_CHAR
    | FsAccess.MAKE_DIR
    | FsAccess.MAKE_REG
    | FsAccess.MAKE_SOCK
    | FsAccess.MAKE_FIFO
    | FsAccess.MAKE_BLOCK
    | FsAccess.MAKE_SYM
    | FsAccess.REFER
    | FsAccess.TRUNCATE
    | FsAccess.IOCTL_DEV
)

#: Landlock rights of each profile access class (before ABI masking).
ACCESS_RIGHTS: Mapping[Access, FsAccess] = {
    Access.RO: _READ,
    Access.ROX: _READ | FsAccess.EXECUTE,
    Access.RW: _READ | _WRITE,
    Access.RWX: _READ | _WRITE | FsAccess.EXECUTE,
}

#: Variables a tool always receives when the base environment has them (spec).
ALWAYS_PASSED = ("OLLIE_TOOLS_PATH", "OLLIE_ELEVATE_SOCKET", "PWD")


EGRESS_NOT_YET = (
    "host rules are not enforced yet: calls do not run behind the egress proxy "
    "(docs/egress.md), so the connect_tcp ports apply to every host"
)


def gaps(rules: EffectiveRules, abi: int, *, namespaces: bool = False) -> tuple[Gap, ...]:
    """What a sandbox for ``rules`` on a kernel of ``abi`` does not enforce.

    ``namespaces``: the call also runs in namespaces (:mod:`.contain`), which
    hide every Unix socket the profile does not name.
    """
    if abi < 1:
        return (
            Gap(
                "landlock",
                "the kernel offers no Landlock: no filesystem, network or IPC restriction",
                needs_abi=1,
                requested=True,
            ),
        )
    found: list[Gap] = []
    network_limited = rules.network.mode is not NetworkMode.UNRESTRICTED
    if abi < 3:
        found.append(Gap("truncate", "truncate(2) of files is not restricted", 3))
    if abi < 4 and network_limited:
        found.append(
            Gap("tcp", "TCP bind/connect restrictions are not enforced", 4, requested=True)
        )
    if abi < 5:
        found.append(Gap("ioctl_dev", "ioctl(2) on device files is not restricted", 5))
    if abi < 6:
        found.append(
            Gap(
                "scope",
                "signals and abstract Unix sockets outside the sandbox are not restricted",
                6,
            )
        )
    if network_limited:
        found.append(Gap("udp", "UDP and other non-TCP sockets are not restricted by Landlock"))
    net = rules.network
    if network_limited and (net.allow_hosts or net.deny_hosts or net.ask):
        found.append(Gap("egress", EGRESS_NOT_YET, requested=True))
    if namespaces:
        found.append(
            Gap(
                "unix_sockets",
                "connect() to named Unix sockets inside paths the profile names is not "
                "restricted (every other socket is absent from the mount view)",
            )
        )
    else:
        found.append(
            Gap(
                "unix_sockets",
                "connect() to named Unix sockets is not restricted; only the environment "
                "allowlist hides X11, D-Bus and ssh-agent",
            )
        )
    return tuple(found)


def _refusal(rules: EffectiveRules, abi: int, fatal: list[Gap]) -> LandlockUnavailableError:
    hint = f"set 'general.best_effort: true' in {rules.source} to run tools anyway"
    if abi < 1:
        return LandlockUnavailableError(
            "this kernel offers no Landlock (not built in, or not enabled with lsm=...), "
            f"so sandboxed tools cannot run; {hint} (only no_new_privs is applied)"
        )
    missing = "; ".join(f"{gap.reason} (needs Landlock ABI {gap.needs_abi})" for gap in fatal)
    return LandlockUnavailableError(
        f"profile {rules.profile!r} asks for what this kernel (Landlock ABI {abi}) "
        f"cannot enforce: {missing}; {hint}"
    )


def prepare(
    rules: EffectiveRules,
    abi: int | None = None,
    *,
    namespaces: bool = False,
    opened: Mapping[str, int] | None = None,
) -> PreparedSandbox:
    """Build the Landlock ruleset for ``rules`` (``abi``: detected when ``None``).

    ``opened``: descriptors of rule paths held by the caller (the pinned working
    directory and paths inside it), used instead of resolving those paths again.

    The returned sandbox owns a file descriptor: close it (or let a
    :class:`SandboxCache` own it).  Its ``report`` lists skipped paths and gaps.
    """
    if abi is None:
        abi = landlock.abi_version()
    found = gaps(rules, abi, namespaces=namespaces)
    if not rules.best_effort and any(gap.feature == "egress" for gap in found):
        raise SandboxError(
            f"profile {rules.profile!r} ({rules.source}) names hosts under network "
            f"(allow_hosts, deny_hosts or ask), and {EGRESS_NOT_YET}; remove them, or set "
            "'general.best_effort: true' to run with the connect_tcp ports alone"
        )
    fatal = [gap for gap in found if gap.requested and (gap.needs_abi or 0) > abi]
    if fatal and not rules.best_effort:
        raise _refusal(rules, abi, fatal)
    if abi < 1:
        return landlock.no_landlock_sandbox(found)
    limited = rules.network.mode is not NetworkMode.UNRESTRICTED
    try:
        builder = RulesetBuilder(
            abi,
            landlock.fs_access_for_abi(abi),
            landlock.net_access_for_abi(abi) if limited else NetAccess(0),
            landlock.scopes_for_abi(abi),
        )
    except OSError as exc:
        raise SandboxError(f"cannot create the Landlock ruleset: {exc}") from exc
    with builder:
        try:
            for rule in rules.paths:
                fd = None if opened is None else opened.get(rule.path)
                builder.add_path(rule.path, ACCESS_RIGHTS[rule.access], opened=fd)
            if rules.network.mode is NetworkMode.RESTRICTED and builder.handled_net:
                for port in rules.network.bind_tcp:
                    builder.add_port(port, NetAccess.BIND_TCP)
                for port in rules.network.connect_tcp:
                    builder.add_port(port, NetAccess.CONNECT_TCP)
        except OSError as exc:
            raise SandboxError(f"cannot add a Landlock rule: {exc}") from exc
        return builder.finish(found)


def _allowed(name: str, patterns: Iterable[str]) -> bool:
    return any(
        fnmatch.fnmatchcase(name, pattern) if pattern.endswith("*") else name == pattern
        for pattern in patterns
    )


def sandbox_env(
    rules: EffectiveRules,
    base_env: Mapping[str, str],
    *,
    always: Iterable[str] = ALWAYS_PASSED,
) -> dict[str, str]:
    """The environment of a sandboxed tool: only the profile's ``env`` names.

    Landlock cannot stop ``connect()`` to named Unix sockets, so the sockets
    a tool could find through ``DISPLAY``, ``DBUS_SESSION_BUS_ADDRESS`` or
    ``SSH_AUTH_SOCK`` are hidden by leaving those variables out unless the
    profile lists them.  ``always`` names are kept too (when present).
    """
    patterns = (*rules.env, *always)
    env = {name: value for name, value in base_env.items() if _allowed(name, patterns)}
    # NAME=VALUE entries set the variable (as landrun does for ollie-core).
    env.update(rules.env_values)
    return env


class SandboxCache:
    """Prepared sandboxes keyed by effective rules, least recently used out.

    A ruleset is built once per distinct rule set and reused.  Rules bind
    inodes when the ruleset is built, so a directory created or replaced
    afterwards is not covered (denied: fails closed).  Not thread-safe; an
    evicted sandbox is closed and its ``preexec`` fails from then on.
    """

    def __init__(self, max_entries: int = 32, abi: int | None = None) -> None:
        if max_entries < 1:
            raise ValueError("max_entries must be at least 1")
        self._max = max_entries
        self._abi = abi
        self._entries: OrderedDict[tuple[object, ...], PreparedSandbox] = OrderedDict()

    @property
    def abi(self) -> int:
        """The kernel's Landlock ABI (detected once)."""
        if self._abi is None:
            self._abi = landlock.abi_version()
        return self._abi

    def get(self, rules: EffectiveRules) -> PreparedSandbox:
        key = rules.cache_key()
        sandbox = self._entries.get(key)
        if sandbox is not None:
            self._entries.move_to_end(key)
            return sandbox
        sandbox = prepare(rules, self.abi)
        self._entries[key] = sandbox
        while len(self._entries) > self._max:
            _, evicted = self._entries.popitem(last=False)
            evicted.close()
        return sandbox

    def __len__(self) -> int:
        return len(self._entries)

    def close(self) -> None:
        while self._entries:
            _, sandbox = self._entries.popitem()
            sandbox.close()
