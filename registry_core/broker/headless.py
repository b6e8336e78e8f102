"""Wiring for headless brokers: one place that builds a :class:`Broker` from an environment."""

from __future__ import annotations

from collections.abc import Mapping

from registry_core import paths
from registry_core.broker.decide.core import Broker, BrokerConfig
from registry_core.broker.question import Prompter
from registry_core.broker.record.audit import audit_log_from_env
from registry_core.broker.remember.policies import PolicyStore
from registry_core.registry import Registry, RegistryLoader
from registry_core.registry.live import LiveRegistry


def build_broker(
    env: Mapping[str, str],
    prompter_name: str | None = None,
    *,
    prompter: Prompter | None = None,
    config: BrokerConfig | None = None,
    resident: bool = True,
) -> Broker:
    """A broker with its own registry, the user's policies and audit log.

    ``prompter_name`` picks a front-end (``auto``, ``terminal``, ``kdialog``,
    ``zenity``, ``none``); ``None`` takes the first of the spec's fallback
    chain, or ``none`` when nothing can ask.

    ``resident``: a long-running broker keeps the registry in memory, refreshed
    from file-system events (:class:`LiveRegistry`); otherwise (a broker for one
    command) each request looks up only the tool it names.
    """
    from registry_core.broker.ask.choose import choose_prompter, fallback_chain

    if prompter is None:
        if prompter_name is None:
            chain = fallback_chain(env)
            prompter = chain[0] if chain else choose_prompter("none", env)
        else:
            prompter = choose_prompter(prompter_name, env)
    if resident:
        loader = RegistryLoader(paths.tools_path(env), env, cache_dir=paths.scan_cache_dir(env))
        registry = LiveRegistry(loader).current
        registry_for = None
    else:
        loader = RegistryLoader(paths.tools_path(env), env, cache_dir=None)
        registry = loader.load

        def registry_for(name: str) -> Registry:
            return loader.lookup_registry(name)

    return Broker(
        registry=registry,
        registry_for=registry_for,
        prompter=prompter,
        policies=PolicyStore(paths.policies_file(env)),
        audit=audit_log_from_env(paths.audit_file(env), env),
        config=config,
    )
