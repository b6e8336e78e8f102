"""Tests of the egress host rules (registry_core.egress.rules): parsing and deciding."""

from __future__ import annotations

import ipaddress

import pytest

from registry_core.egress.rules import (
    EgressRules,
    PatternKind,
    Verdict,
    destination,
    is_private,
    parse_pattern,
)
from registry_core.errors import HostPatternError


def ip(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    return ipaddress.ip_address(text)


PUBLIC = ip("203.0.113.7")
PUBLIC2 = ip("198.51.100.9")


@pytest.mark.parametrize(
    ("text", "kind", "name", "network", "port"),
    [
        ("api.github.com", PatternKind.NAME, "api.github.com", None, None),
        ("API.GitHub.COM.", PatternKind.NAME, "api.github.com", None, None),
        ("api.github.com:443", PatternKind.NAME, "api.github.com", None, 443),
        ("localhost", PatternKind.NAME, "localhost", None, None),
        ("xn--bcher-kva.example", PatternKind.NAME, "xn--bcher-kva.example", None, None),
        ("*.example.com", PatternKind.SUFFIX, "example.com", None, None),
        ("*.Example.COM.:8443", PatternKind.SUFFIX, "example.com", None, 8443),
        ("203.0.113.7", PatternKind.ADDRESS, "", "203.0.113.7/32", None),
        ("203.0.113.7:22", PatternKind.ADDRESS, "", "203.0.113.7/32", 22),
        ("::ffff:10.0.0.1", PatternKind.ADDRESS, "", "10.0.0.1/32", None),
        ("2001:db8::1", PatternKind.ADDRESS, "", "2001:db8::1/128", None),
        ("[2001:db8::1]:443", PatternKind.ADDRESS, "", "2001:db8::1/128", 443),
        ("[::1]", PatternKind.ADDRESS, "", "::1/128", None),
        ("10.0.0.0/8", PatternKind.NETWORK, "", "10.0.0.0/8", None),
        ("10.0.0.0/8:5432", PatternKind.NETWORK, "", "10.0.0.0/8", 5432),
        ("fc00::/7", PatternKind.NETWORK, "", "fc00::/7", None),
        ("[fc00::/7]:443", PatternKind.NETWORK, "", "fc00::/7", 443),
        ("::ffff:10.0.0.0/104", PatternKind.NETWORK, "", "10.0.0.0/8", None),
        ("  padded.example  ", PatternKind.NAME, "padded.example", None, None),
    ],
)
def test_patterns_parse(
    text: str, kind: PatternKind, name: str, network: str | None, port: int | None
) -> None:
    pattern = parse_pattern(text)
    assert pattern.kind is kind
    assert pattern.name == name
    assert (str(pattern.network) if pattern.network else None) == network
    assert pattern.port == port
    assert pattern.text == text


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("*", "every host"),
        ("*.com", "two labels"),
        ("*.com.", "two labels"),
        ("*.*.example.com", "leading '*.'"),
        ("a.*.example.com", "leading '*.'"),
        ("foo*.example.com", "leading '*.'"),
        ("*example.com", "leading '*.'"),
        ("10.*", "inside addresses"),
        ("10.0.0.*", "inside addresses"),
        ("*.10.0.0", "inside addresses"),
        ("*.0.0.1", "inside addresses"),
        ("2001:db8::*", "inside addresses"),
        ("127.1", "not an IP address"),
        ("1.2.3.4.5", "numeric last label"),
        ("256.1.1.1", "not an IP address"),
        ("example.123", "numeric last label"),
        ("10.0.0.1/8", "host bits"),
        ("10.0.0.0/33", "not an address range"),
        ("bücher.example", "xn--"),
        ("*.bücher.example", "xn--"),
        ("exa mple.com", "label"),
        ("-bad.example", "label"),
        ("bad-.example", "label"),
        ("a..b", "label"),
        ("x" * 64 + ".example", "label"),
        (".".join(["a" * 60] * 5), "253"),
        ("", "empty"),
        ("   ", "empty"),
        ("example.com:0", "port"),
        ("example.com:65536", "port"),
        ("example.com:080", "port"),
        ("example.com:http", "port"),
        (":443", "no host"),
        ("[2001:db8::1", "unclosed"),
        ("[2001:db8::1]443", "after ']'"),
        ("fe80::1%eth0", "not an IP address"),
        ("::ffff:0:0/90", "not an address range"),
        ("http://example.com", "not a URL"),
    ],
)
def test_bad_patterns_are_refused_with_a_reason(text: str, why: str) -> None:
    with pytest.raises(HostPatternError) as info:
        parse_pattern(text)
    assert why in info.value.reason
    assert info.value.text == text


@pytest.mark.parametrize(
    ("address", "private"),
    [
        ("127.0.0.1", True),
        ("127.255.255.254", True),
        ("10.1.2.3", True),
        ("172.16.0.1", True),
        ("172.31.255.255", True),
        ("172.32.0.1", False),
        ("192.168.1.1", True),
        ("169.254.169.254", True),
        ("100.64.0.1", True),
        ("100.127.255.255", True),
        ("100.128.0.1", False),
        ("0.0.0.0", True),
        ("224.0.0.1", True),
        ("::1", True),
        ("::", True),
        ("fc00::1", True),
        ("fd00:ec2::254", True),
        ("fe80::1", True),
        ("::ffff:127.0.0.1", True),
        ("::ffff:203.0.113.7", False),
        ("203.0.113.7", False),
        ("2001:db8::1", False),
    ],
)
def test_private_ranges(address: str, private: bool) -> None:
    assert is_private(ip(address)) is private


def test_destination_normalises_names_and_addresses() -> None:
    assert destination("API.Example.COM.", 443) == ("api.example.com", 443, "api.example.com")
    assert destination("::ffff:10.0.0.1", 80) == ("10.0.0.1", 80, None)
    assert destination("[2001:db8::1]", 80) == ("2001:db8::1", 80, None)
    with pytest.raises(HostPatternError):
        destination("127.1", 80)  # never handed to the resolver as a name
    with pytest.raises(HostPatternError):
        destination("bücher.example", 80)


def rules(
    allow: tuple[str, ...] = (),
    deny: tuple[str, ...] = (),
    *,
    ask: bool = False,
    ports: tuple[int, ...] = (),
) -> EgressRules:
    return EgressRules.from_text(allow, deny, ask=ask, default_ports=ports)


def decide(r: EgressRules, host: str, port: int, *addresses: str) -> Verdict:
    dest = destination(host, port)
    addrs = [ip(a) for a in addresses] or ([ip(dest.host)] if dest.name is None else [])
    return r.decide(dest, addrs).verdict


def test_exact_name_allows_on_default_ports_only() -> None:
    r = rules(("api.github.com",))
    assert decide(r, "api.github.com", 443, "203.0.113.7") is Verdict.ALLOW
    assert decide(r, "API.GITHUB.COM.", 80, "203.0.113.7") is Verdict.ALLOW
    assert decide(r, "api.github.com", 22, "203.0.113.7") is Verdict.UNKNOWN
    assert decide(r, "github.com", 443, "203.0.113.7") is Verdict.UNKNOWN


def test_connect_tcp_ports_replace_the_defaults_and_an_entry_port_wins() -> None:
    r = rules(("a.example", "b.example:8443"), ports=(8080,))
    assert decide(r, "a.example", 8080, "203.0.113.7") is Verdict.ALLOW
    assert decide(r, "a.example", 443, "203.0.113.7") is Verdict.UNKNOWN
    assert decide(r, "b.example", 8443, "203.0.113.7") is Verdict.ALLOW
    assert decide(r, "b.example", 8080, "203.0.113.7") is Verdict.UNKNOWN


def test_wildcard_matches_below_the_suffix_only() -> None:
    r = rules(("*.example.com",))
    assert decide(r, "a.example.com", 443, "203.0.113.7") is Verdict.ALLOW
    assert decide(r, "a.b.example.com", 443, "203.0.113.7") is Verdict.ALLOW
    assert decide(r, "example.com", 443, "203.0.113.7") is Verdict.UNKNOWN
    assert decide(r, "badexample.com", 443, "203.0.113.7") is Verdict.UNKNOWN


def test_deny_wins_over_allow_and_denies_every_port() -> None:
    r = rules(("*.example.com",), ("bad.example.com",), ask=True)
    assert decide(r, "bad.example.com", 443, "203.0.113.7") is Verdict.DENY
    assert decide(r, "bad.example.com", 22, "203.0.113.7") is Verdict.DENY
    assert decide(r, "ok.example.com", 443, "203.0.113.7") is Verdict.ALLOW


def test_deny_with_a_port_denies_that_port() -> None:
    r = rules(("a.example",), ("a.example:80",))
    assert decide(r, "a.example", 80, "203.0.113.7") is Verdict.DENY
    assert decide(r, "a.example", 443, "203.0.113.7") is Verdict.ALLOW


def test_deny_by_address_or_range_applies_to_resolved_names() -> None:
    r = rules(("*.example.com",), ("198.51.100.0/24",), ask=True)
    assert decide(r, "a.example.com", 443, "203.0.113.7", "198.51.100.9") is Verdict.DENY
    assert decide(r, "198.51.100.1", 443) is Verdict.DENY


def test_denied_name_is_decided_before_resolution() -> None:
    r = rules((), ("*.tracker.example",))
    early = r.denied_by_name(destination("x.tracker.example", 443))
    assert early is not None and early.verdict is Verdict.DENY
    assert r.denied_by_name(destination("ok.example", 443)) is None


def test_unknown_is_asked_or_denied() -> None:
    assert decide(rules(ask=True), "new.example", 443, "203.0.113.7") is Verdict.ASK
    assert decide(rules(), "new.example", 443, "203.0.113.7") is Verdict.UNKNOWN


@pytest.mark.parametrize("address", ["127.0.0.1", "10.0.0.5", "169.254.169.254", "::1", "fd00::1"])
def test_private_addresses_are_refused_never_asked(address: str) -> None:
    r = rules(("*.example.com", "0.0.0.0/0", "::/0"), ask=True)
    assert decide(r, address, 443) is Verdict.PRIVATE
    # A wildcard never names a private address: a "rebinding" name is refused.
    assert decide(r, "evil.example.com", 443, address) is Verdict.PRIVATE


def test_private_addresses_named_explicitly_are_allowed() -> None:
    r = rules(("db.internal", "127.0.0.1:8080", "10.0.0.0/8", "[::1]:9000"))
    assert decide(r, "db.internal", 443, "10.9.9.9") is Verdict.ALLOW
    assert decide(r, "127.0.0.1", 8080) is Verdict.ALLOW
    assert decide(r, "127.0.0.1", 8081) is Verdict.PRIVATE
    assert decide(r, "10.1.2.3", 443) is Verdict.ALLOW
    assert decide(r, "other.internal", 443, "10.1.2.3") is Verdict.ALLOW  # the range names it
    assert decide(r, "::1", 9000) is Verdict.ALLOW
    assert decide(r, "::ffff:127.0.0.1", 8080) is Verdict.ALLOW  # mapped = IPv4


def test_ipv4_mapped_addresses_are_their_ipv4_address() -> None:
    r = rules(("203.0.113.7",), ("198.51.100.9",))
    assert decide(r, "::ffff:203.0.113.7", 443) is Verdict.ALLOW
    assert decide(r, "::ffff:198.51.100.9", 443) is Verdict.DENY
    assert decide(r, "x.example", 443, "::ffff:127.0.0.1") is Verdict.PRIVATE


def test_only_checked_addresses_are_handed_back() -> None:
    r = rules(("*.example.com",))
    decision = r.decide(destination("a.example.com", 443), [PUBLIC, ip("127.0.0.1"), PUBLIC2])
    assert decision.verdict is Verdict.ALLOW
    assert decision.addresses == (PUBLIC, PUBLIC2)
    ranged = rules(("203.0.113.0/24",)).decide(destination("a.example", 443), [PUBLIC2, PUBLIC])
    assert ranged.verdict is Verdict.ALLOW and ranged.addresses == (PUBLIC,)


def test_decisions_name_the_rule_and_its_origin() -> None:
    r = EgressRules.from_text(
        ["a.example"], ["b.example"], allow_origins=["network.allow_hosts, line 4"]
    )
    allowed = r.decide(destination("a.example", 443), [PUBLIC])
    assert allowed.rule is not None and "line 4" in allowed.reason
    denied = r.decide(destination("b.example", 443), [PUBLIC])
    assert "'b.example' (network.deny_hosts)" in denied.reason
    assert denied.refused and not allowed.refused


def test_a_name_without_addresses_is_refused() -> None:
    assert decide(rules(("a.example",)), "a.example", 443) is Verdict.UNKNOWN
