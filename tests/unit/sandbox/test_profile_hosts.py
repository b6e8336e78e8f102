"""network.allow_hosts / deny_hosts / ask in profiles (parsed, positioned errors, remembered)."""

from __future__ import annotations

from pathlib import Path

import pytest

from registry_core.egress.rules import Verdict, destination, rules_for_policy
from registry_core.errors import ProfileError
from registry_core.sandbox import profile_cache
from registry_core.sandbox.profiles import load_profile_file, parse_profile_text
from registry_core.sandbox.rules import effective_rules

TEXT = """\
network:
  enabled: true
  connect_tcp: ["443"]
  allow_hosts:
    - api.github.com
    - "*.example.com:8443"
    - 10.0.0.0/8
  deny_hosts: [bad.example.com]
  ask: yes
"""


def test_hosts_are_parsed_with_their_lines() -> None:
    profile = parse_profile_text(TEXT, name="p", source="/p.yaml")
    net = profile.network
    assert net.allow_hosts == ("api.github.com", "*.example.com:8443", "10.0.0.0/8")
    assert net.deny_hosts == ("bad.example.com",)
    assert net.ask is True
    assert net.host_lines == (5, 6, 7, 8)
    assert net.host_origins() == (
        (
            "network.allow_hosts, line 5",
            "network.allow_hosts, line 6",
            "network.allow_hosts, line 7",
        ),
        ("network.deny_hosts, line 8",),
    )
    assert profile.warnings == ()


def test_defaults_are_empty_and_ask_false() -> None:
    net = parse_profile_text("network: {enabled: true}", name="p", source="/p.yaml").network
    assert (net.allow_hosts, net.deny_hosts, net.ask) == ((), (), False)


def test_the_policy_carries_the_rules_and_their_origins(tmp_path: Path) -> None:
    profile = parse_profile_text(TEXT, name="p", source="/p.yaml")
    policy = effective_rules(profile, {"HOME": str(tmp_path)}, str(tmp_path)).network
    assert policy.allow_hosts == profile.network.allow_hosts
    assert policy.ask is True
    assert policy.deny_origins == ("network.deny_hosts, line 8",)
    rules = rules_for_policy(policy)
    decision = rules.decide(destination("api.github.com", 443), [])
    assert decision.verdict is Verdict.UNKNOWN  # no addresses
    import ipaddress

    public = ipaddress.ip_address("203.0.113.7")
    allowed = rules.decide(destination("api.github.com", 443), [public])
    assert allowed.verdict is Verdict.ALLOW and "line 5" in allowed.reason
    # connect_tcp gives the default ports: 80 is not among them.
    assert rules.decide(destination("api.github.com", 80), [public]).verdict is Verdict.ASK
    denied = rules.decide(destination("bad.example.com", 8443), [public])
    assert denied.verdict is Verdict.DENY and "line 8" in denied.reason


@pytest.mark.parametrize(
    ("entry", "key", "why"),
    [
        ('"*"', "network.allow_hosts", "every host"),
        ('"*.com"', "network.allow_hosts", "two labels"),
        ('"10.0.*"', "network.allow_hosts", "inside addresses"),
        ('"api.github.com:99999"', "network.allow_hosts", "port"),
        ("bücher.example", "network.allow_hosts", "xn--"),
    ],
)
def test_bad_entries_name_key_value_and_line(entry: str, key: str, why: str) -> None:
    text = f"network:\n  enabled: true\n  allow_hosts:\n    - ok.example\n    - {entry}\n"
    with pytest.raises(ProfileError) as info:
        parse_profile_text(text, name="p", source="/p.yaml")
    message = str(info.value)
    assert message.startswith("/p.yaml: " + key)
    assert why in message
    assert "(line 5)" in message
    assert entry.strip('"') in message


def test_bad_deny_entry_and_bad_ask_are_refused() -> None:
    with pytest.raises(ProfileError, match=r"network.deny_hosts: .*'\*'.*\(line 2\)"):
        parse_profile_text("network:\n  deny_hosts: ['*']\n", name="p", source="/p.yaml")
    with pytest.raises(ProfileError, match=r"network\.ask"):
        parse_profile_text("network: {ask: sometimes}", name="p", source="/p.yaml")
    with pytest.raises(ProfileError, match=r"network\.allow_hosts: expected a list"):
        parse_profile_text("network: {allow_hosts: a.example}", name="p", source="/p.yaml")


def test_hosts_outside_a_restricted_network_are_warned_about() -> None:
    profile = parse_profile_text(
        "network: {allow_hosts: [a.example]}\n", name="p", source="/p.yaml"
    )
    assert any("ignored when the network is deny" in w for w in profile.warnings)
    empty = parse_profile_text(
        "network: {enabled: true, allow_hosts: ['']}\n", name="p", source="/p.yaml"
    )
    assert empty.network.allow_hosts == ()
    assert any("empty entry" in w for w in empty.warnings)


def test_the_remembered_parse_keeps_the_hosts(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(TEXT)
    first = load_profile_file(path, remember=True)
    assert profile_cache.cache_path(path).exists()
    again = load_profile_file(path, remember=True)
    assert again == first
    assert (
        profile_cache.from_json(profile_cache.to_json(first), name=first.name, source=first.source)
        == first
    )


def test_host_rules_that_no_call_enforces_yet_are_refused_unless_best_effort(
    tmp_path: Path,
) -> None:
    """Fail closed: a profile naming hosts must not run as if they held."""
    from registry_core.errors import SandboxError
    from registry_core.sandbox.apply import gaps, prepare
    from registry_core.sandbox.profiles import NetworkMode
    from registry_core.sandbox.rules import EffectiveRules, NetworkPolicy

    policy = NetworkPolicy(NetworkMode.RESTRICTED, (), (443,), deny_hosts=("evil.example",))
    rules = EffectiveRules("hosts", str(tmp_path / "hosts.yaml"), (), policy, (), False)
    with pytest.raises(SandboxError, match=r"deny_hosts.*best_effort"):
        prepare(rules, 7, namespaces=True)
    lenient = rules._replace(best_effort=True)
    assert [g.feature for g in gaps(lenient, 7, namespaces=True) if g.feature == "egress"] == [
        "egress"
    ]
    plain = rules._replace(network=NetworkPolicy(NetworkMode.RESTRICTED, (), (443,)))
    assert "egress" not in [g.feature for g in gaps(plain, 7, namespaces=True)]
