"""Egress rules: which destinations a sandboxed tool may reach through the proxy.

Pure: no I/O, no resolution.  The proxy (:mod:`registry_core.egress.proxy`)
resolves a name itself and hands the addresses to :meth:`EgressRules.decide`.

Host patterns (``network.allow_hosts`` / ``network.deny_hosts`` entries):

=========================  ===============================================
``api.github.com``         that exact name (case-insensitive, one trailing dot ignored)
``*.example.com``          any name *below* example.com (not example.com itself);
                           at least two labels after ``*.``
``203.0.113.7``            that address (IPv4-mapped IPv6 is the IPv4 address)
``2001:db8::1``            that IPv6 address (``[2001:db8::1]:443`` with a port)
``198.51.100.0/24``        that range (host bits must be zero)
``NAME:PORT``              any of the above with one port (1..65535)
=========================  ===============================================

Refused with a :class:`~registry_core.errors.HostPatternError`: ``*``, a
one-label wildcard (``*.com``), a ``*`` anywhere but a leading ``*.`` label,
wildcards inside addresses (``10.*``, ``10.0.0.*``), names whose last label
is numeric (``127.1``: the C library reads it as an address), and non-ASCII
names: write internationalised names in their ASCII (``xn--``) form, as a
client sends them.  We do not convert them ourselves (IDNA 2003 and 2008
disagree on some names, and a look-alike could be let through).

Ports: an entry's own port; otherwise the ``connect_tcp`` ports given as
``default_ports``; otherwise 80 and 443.  A ``deny_hosts`` entry without a
port denies **every** port (a denial never narrows silently).

Decision, per destination (name as asked, port, resolved addresses):

1. a matching ``deny_hosts`` entry (by name, or by any resolved address):
   **deny**, never asked;
2. each address in a private range (:data:`PRIVATE_NETWORKS`) is kept only
   when an ``allow_hosts`` entry names it explicitly: the exact name asked,
   that address, or a range lying wholly inside the private ranges.  A
   wildcard (``*.example.com``, ``0.0.0.0/0``) never counts;
3. public addresses matched by an ``allow_hosts`` entry (by name or address):
   **allow**, connecting to those addresses only;
4. other public addresses: **ask** when ``ask`` is true, else **deny**;
5. nothing left (only private addresses): **private**, refused, never asked.
"""

from __future__ import annotations

import enum
import ipaddress
import re
from collections.abc import Iterable, Sequence
from typing import NamedTuple, Protocol

from registry_core.errors import HostPatternError

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

DEFAULT_PORTS = (80, 443)
ALL_PORTS: tuple[int, ...] = ()  # a deny entry without a port: every port

# Loopback, private, link-local (incl. the cloud metadata address 169.254.169.254),
# CGNAT, unique-local and link-local IPv6; also "this network", multicast and the
# reserved block (a connect to 0.0.0.0 reaches the local host on Linux).
PRIVATE_NETWORKS: tuple[IPNetwork, ...] = tuple(
    ipaddress.ip_network(n)
    for n in (
        "127.0.0.0/8",
        "10.0.0.0/8",
        "172.16.0.0/12",
        "192.168.0.0/16",
        "169.254.0.0/16",
        "100.64.0.0/10",
        "0.0.0.0/8",
        "224.0.0.0/4",
        "240.0.0.0/4",
        "::1/128",
        "::/128",
        "fc00::/7",
        "fe80::/10",
        "ff00::/8",
    )
)

_LABEL_RE = re.compile(r"[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?")
_PORT_RE = re.compile(r"[1-9][0-9]{0,4}")
_V4ISH_RE = re.compile(r"[0-9*]+(\.[0-9*]+){0,3}(/[0-9]+)?")
_MAPPED = ipaddress.IPv6Network("::ffff:0:0/96")


class PatternKind(enum.Enum):
    NAME = "name"
    SUFFIX = "suffix"  # *.example.com
    ADDRESS = "address"
    NETWORK = "network"


class HostPattern(NamedTuple):
    """One parsed entry; ``text`` as written, ``origin`` e.g. ``network.allow_hosts, line 7``."""

    kind: PatternKind
    text: str
    name: str = ""  # NAME: the name; SUFFIX: the part after "*."
    network: IPNetwork | None = None  # ADDRESS: a /32 or /128
    port: int | None = None
    origin: str = ""

    def ports(self, default: tuple[int, ...]) -> tuple[int, ...]:
        return (self.port,) if self.port is not None else default

    def matches_name(self, name: str | None) -> bool:
        if name is None:
            return False
        if self.kind is PatternKind.NAME:
            return name == self.name
        if self.kind is PatternKind.SUFFIX:
            return name.endswith("." + self.name)
        return False

    def matches_address(self, address: IPAddress) -> bool:
        return self.network is not None and address in self.network

    def names_private(self, name: str | None, address: IPAddress) -> bool:
        """Whether this entry names ``address`` (reached as ``name``) explicitly."""
        if self.kind is PatternKind.NAME:
            return name == self.name
        if self.kind is PatternKind.ADDRESS:
            return self.matches_address(address)
        if self.kind is PatternKind.NETWORK and self.network is not None:
            net = self.network
            inside = any(_within(net, p) for p in PRIVATE_NETWORKS)
            return inside and address in net
        return False


def _within(net: IPNetwork, outer: IPNetwork) -> bool:
    if isinstance(net, ipaddress.IPv4Network) and isinstance(outer, ipaddress.IPv4Network):
        return net.subnet_of(outer)
    if isinstance(net, ipaddress.IPv6Network) and isinstance(outer, ipaddress.IPv6Network):
        return net.subnet_of(outer)
    return False


def normalise_address(address: IPAddress) -> IPAddress:
    """IPv4-mapped IPv6 (``::ffff:10.0.0.1``) is the IPv4 address it carries."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def parse_address(text: str) -> IPAddress | None:
    """``text`` as an IP address (brackets, zone and mapping removed), else None."""
    word = text[1:-1] if text.startswith("[") and text.endswith("]") else text
    if "%" in word:  # a zone (fe80::1%eth0): the address without it
        word = word.split("%", 1)[0]
    try:
        return normalise_address(ipaddress.ip_address(word))
    except ValueError:
        return None


def is_private(address: IPAddress) -> bool:
    address = normalise_address(address)
    return any(address in net for net in PRIVATE_NETWORKS)


def normalise_name(text: str) -> str:
    """A host name as compared: lower case, one trailing dot removed.

    Raises :class:`HostPatternError` when it is not an ASCII host name.
    """
    if not text.isascii():
        raise HostPatternError(
            text, "not an ASCII host name: write an internationalised name in its xn-- form"
        )
    name = text.lower()
    if name.endswith("."):
        name = name[:-1]
    if not name or len(name) > 253:
        raise HostPatternError(text, "not a host name (1 to 253 characters)")
    labels = name.split(".")
    for label in labels:
        if not _LABEL_RE.fullmatch(label):
            raise HostPatternError(
                text, f"not a host name: label {label!r} (letters, digits, - and _, 1-63)"
            )
    if labels[-1].isdigit():
        raise HostPatternError(
            text, "neither a host name nor an IP address (a numeric last label reads as one)"
        )
    return name


def _split_port(text: str) -> tuple[str, int | None]:
    if text.startswith("["):
        host, sep, rest = text[1:].partition("]")
        if not sep:
            raise HostPatternError(text, "unclosed '[' (write [ADDRESS]:PORT)")
        if not rest:
            return host, None
        if not rest.startswith(":"):
            raise HostPatternError(text, "expected :PORT after ']'")
        return host, _port(text, rest[1:])
    if text.count(":") == 1:
        host, _, port = text.partition(":")
        return host, _port(text, port)
    return text, None  # no port, or a bare IPv6 address/range


def _port(text: str, word: str) -> int:
    if not _PORT_RE.fullmatch(word) or int(word) > 65535:
        raise HostPatternError(text, f"port {word!r} is not 1..65535")
    return int(word)


def parse_pattern(text: str, origin: str = "") -> HostPattern:
    """One ``allow_hosts`` / ``deny_hosts`` entry; :class:`HostPatternError` when invalid."""
    entry = text.strip()
    if not entry:
        raise HostPatternError(text, "empty entry")
    if "://" in entry:
        raise HostPatternError(
            text, "a host, not a URL: write api.example.com or api.example.com:443"
        )
    host, port = _split_port(entry)
    if not host:
        raise HostPatternError(text, "no host before the port")
    if "*" in host:
        return _wildcard(text, host, port, origin)
    if "/" in host:
        try:
            network = ipaddress.ip_network(host, strict=True)
        except ValueError as exc:
            raise HostPatternError(text, f"not an address range: {exc}") from exc
        if isinstance(network, ipaddress.IPv6Network) and network.subnet_of(_MAPPED):
            mapped = ipaddress.ip_address(int(network.network_address) & 0xFFFFFFFF)
            network = ipaddress.ip_network(f"{mapped}/{network.prefixlen - 96}")
        return HostPattern(PatternKind.NETWORK, text, network=network, port=port, origin=origin)
    if ":" in host or _V4ISH_RE.fullmatch(host):
        address = parse_address(host)
        if address is None or "%" in host:
            raise HostPatternError(text, "not an IP address")
        return HostPattern(
            PatternKind.ADDRESS,
            text,
            network=ipaddress.ip_network(address),
            port=port,
            origin=origin,
        )
    return HostPattern(PatternKind.NAME, text, name=_name(text, host), port=port, origin=origin)


def _name(text: str, host: str) -> str:
    try:
        return normalise_name(host)
    except HostPatternError as exc:
        raise HostPatternError(text, exc.reason) from exc


def _wildcard(text: str, host: str, port: int | None, origin: str) -> HostPattern:
    if host == "*":
        raise HostPatternError(text, "'*' would match every host: list the hosts instead")
    if _V4ISH_RE.fullmatch(host) or ":" in host:
        raise HostPatternError(text, "no wildcards inside addresses: write a range (10.0.0.0/8)")
    if not host.startswith("*.") or "*" in host[2:]:
        raise HostPatternError(text, "a wildcard is only a leading '*.' label (*.example.com)")
    suffix = _name(text, host[2:])
    if suffix.count(".") < 1:
        raise HostPatternError(
            text, "a wildcard needs at least two labels after '*.' (*.example.com, not *.com)"
        )
    if suffix.rsplit(".", 1)[-1].isdigit():
        raise HostPatternError(text, "no wildcards inside addresses: write a range (10.0.0.0/8)")
    return HostPattern(PatternKind.SUFFIX, text, name=suffix, port=port, origin=origin)


class Verdict(enum.Enum):
    ALLOW = "allow"  # an allow_hosts entry
    DENY = "deny"  # a deny_hosts entry
    PRIVATE = "private"  # only private addresses, none named explicitly
    ASK = "ask"  # unknown, ask: true
    UNKNOWN = "unknown"  # unknown, ask: false: refused


class RuleDecision(NamedTuple):
    """What the rules say; ``addresses`` are those the proxy may connect to (ALLOW, ASK)."""

    verdict: Verdict
    reason: str
    addresses: tuple[IPAddress, ...] = ()
    rule: HostPattern | None = None

    @property
    def refused(self) -> bool:
        return self.verdict in (Verdict.DENY, Verdict.PRIVATE, Verdict.UNKNOWN)


class Destination(NamedTuple):
    """A destination as the tool asked for it: ``name`` is None for an address literal."""

    host: str  # as compared: a normalised name or an address's text
    port: int
    name: str | None


def destination(host: str, port: int) -> Destination:
    """The :class:`Destination` for ``host`` as a tool sent it (raises HostPatternError)."""
    address = parse_address(host)
    if address is not None:
        return Destination(str(address), port, None)
    return Destination(normalise_name(host), port, normalise_name(host))


class EgressRules:
    """The parsed ``allow_hosts`` / ``deny_hosts`` / ``ask`` of one profile."""

    def __init__(
        self,
        allow: Sequence[HostPattern] = (),
        deny: Sequence[HostPattern] = (),
        *,
        ask: bool = False,
        default_ports: Iterable[int] = (),
    ) -> None:
        self.allow = tuple(allow)
        self.deny = tuple(deny)
        self.ask = ask
        self.default_ports = tuple(default_ports) or DEFAULT_PORTS

    @classmethod
    def from_text(
        cls,
        allow: Iterable[str] = (),
        deny: Iterable[str] = (),
        *,
        ask: bool = False,
        default_ports: Iterable[int] = (),
        allow_origins: Sequence[str] = (),
        deny_origins: Sequence[str] = (),
    ) -> EgressRules:
        """Parse the entries as written (raises HostPatternError)."""

        def parsed(entries: Iterable[str], origins: Sequence[str], key: str) -> list[HostPattern]:
            out = []
            for index, text in enumerate(entries):
                origin = origins[index] if index < len(origins) else key
                out.append(parse_pattern(text, origin))
            return out

        return cls(
            parsed(allow, allow_origins, "network.allow_hosts"),
            parsed(deny, deny_origins, "network.deny_hosts"),
            ask=ask,
            default_ports=default_ports,
        )

    def _port_ok(self, pattern: HostPattern, port: int, *, deny: bool) -> bool:
        ports = pattern.ports(ALL_PORTS if deny else self.default_ports)
        return not ports or port in ports

    def denied_by_name(self, dest: Destination) -> RuleDecision | None:
        """A deny decided before resolving (a denied name is not even looked up)."""
        for pattern in self.deny:
            if self._port_ok(pattern, dest.port, deny=True) and pattern.matches_name(dest.name):
                return RuleDecision(Verdict.DENY, f"denied by {_shown(pattern)}", (), pattern)
        return None

    def decide(self, dest: Destination, addresses: Iterable[IPAddress]) -> RuleDecision:
        """Decide ``dest`` resolved to ``addresses`` (address literal: itself)."""
        addrs = tuple(dict.fromkeys(normalise_address(a) for a in addresses))
        early = self.denied_by_name(dest)
        if early is not None:
            return early
        for pattern in self.deny:
            if self._port_ok(pattern, dest.port, deny=True) and any(
                pattern.matches_address(a) for a in addrs
            ):
                return RuleDecision(Verdict.DENY, f"denied by {_shown(pattern)}", (), pattern)
        allow = [p for p in self.allow if self._port_ok(p, dest.port, deny=False)]
        allowed: list[IPAddress] = []
        unknown: list[IPAddress] = []
        private: list[IPAddress] = []
        rule: HostPattern | None = None
        for address in addrs:
            if is_private(address):
                found = next((p for p in allow if p.names_private(dest.name, address)), None)
                if found is None:
                    private.append(address)
                    continue
            else:
                found = next(
                    (p for p in allow if p.matches_name(dest.name) or p.matches_address(address)),
                    None,
                )
                if found is None:
                    unknown.append(address)
                    continue
            allowed.append(address)
            rule = rule or found
        if allowed and rule is not None:
            return RuleDecision(Verdict.ALLOW, f"allowed by {_shown(rule)}", tuple(allowed), rule)
        if unknown:
            if self.ask:
                return RuleDecision(Verdict.ASK, "not in allow_hosts: asking", tuple(unknown))
            return RuleDecision(
                Verdict.UNKNOWN, "not in allow_hosts (and the profile does not ask)"
            )
        if private:
            shown = ", ".join(str(a) for a in private)
            return RuleDecision(
                Verdict.PRIVATE,
                f"private address ({shown}) not named in allow_hosts",
            )
        return RuleDecision(Verdict.UNKNOWN, "the name has no address")


def _shown(pattern: HostPattern) -> str:
    where = f" ({pattern.origin})" if pattern.origin else ""
    return f"{pattern.text!r}{where}"


def rules_for_policy(policy: _PolicyLike) -> EgressRules:
    """The rules of an :class:`~registry_core.sandbox.rules.NetworkPolicy` (checked on load)."""
    return EgressRules.from_text(
        policy.allow_hosts,
        policy.deny_hosts,
        ask=policy.ask,
        default_ports=policy.connect_tcp,
        allow_origins=policy.allow_origins,
        deny_origins=policy.deny_origins,
    )


class _PolicyLike(Protocol):
    @property
    def allow_hosts(self) -> tuple[str, ...]: ...
    @property
    def deny_hosts(self) -> tuple[str, ...]: ...
    @property
    def ask(self) -> bool: ...
    @property
    def connect_tcp(self) -> tuple[int, ...]: ...
    @property
    def allow_origins(self) -> tuple[str, ...]: ...
    @property
    def deny_origins(self) -> tuple[str, ...]: ...
