"""The sandbox half of the dispatcher: profiles, effective rules and Landlock.

Typical use by a dispatcher (one :class:`SandboxCache` per program)::

    profile = load_profile(env)                      # installs the default on first use
    rules = effective_rules(profile, env, cwd)       # templates expanded
    sandbox = cache.get(rules)                       # ruleset built in this process
    Popen(argv, cwd=cwd, env=sandbox_env(rules, env) | extra,
          preexec_fn=sandbox.preexec)                # child: no_new_privs + restrict_self

Modules: :mod:`.profile` (YAML, validation), :mod:`.rules` (templates),
:mod:`.ldd`, :mod:`.landlock` (ctypes syscalls), :mod:`.apply` (ruleset and
environment), :mod:`.describe` (``ollie-tools sandbox show``; import its
functions from it: the package's ``describe`` is that module).

Names are imported lazily (PEP 562): ``ollie-tools call`` loads only the
modules a sandboxed call needs (never :mod:`.describe` or the YAML parser).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from registry_core.sandbox.apply import (
        ACCESS_RIGHTS,
        ALWAYS_PASSED,
        SandboxCache,
        gaps,
        prepare,
        sandbox_env,
    )
    from registry_core.sandbox.landlock import PreparedSandbox, abi_version
    from registry_core.sandbox.ldd import LddResolver, LddResult
    from registry_core.sandbox.profiles import (
        Access,
        LogLevel,
        NetworkMode,
        SandboxProfile,
        install_default_profile,
        load_profile,
        load_profile_file,
        parse_profile,
        parse_profile_text,
    )
    from registry_core.sandbox.report import EnforcementReport, Gap, SkippedPath
    from registry_core.sandbox.rules import (
        EffectiveRules,
        NetworkPolicy,
        PathRule,
        effective_rules,
        expand_path,
        with_command,
    )

_WHERE = {
    "ACCESS_RIGHTS": "apply",
    "ALWAYS_PASSED": "apply",
    "SandboxCache": "apply",
    "gaps": "apply",
    "prepare": "apply",
    "sandbox_env": "apply",
    "PreparedSandbox": "landlock",
    "abi_version": "landlock",
    "LddResolver": "ldd",
    "LddResult": "ldd",
    "Access": "profiles",
    "LogLevel": "profiles",
    "NetworkMode": "profiles",
    "SandboxProfile": "profiles",
    "install_default_profile": "profiles",
    "load_profile": "profiles",
    "load_profile_file": "profiles",
    "parse_profile": "profiles",
    "parse_profile_text": "profiles",
    "EnforcementReport": "report",
    "Gap": "report",
    "SkippedPath": "report",
    "EffectiveRules": "rules",
    "NetworkPolicy": "rules",
    "PathRule": "rules",
    "effective_rules": "rules",
    "expand_path": "rules",
    "with_command": "rules",
}

__all__ = [
    "ACCESS_RIGHTS",
    "ALWAYS_PASSED",
    "Access",
    "EffectiveRules",
    "EnforcementReport",
    "Gap",
    "LddResolver",
    "LddResult",
    "LogLevel",
    "NetworkMode",
    "NetworkPolicy",
    "PathRule",
    "PreparedSandbox",
    "SandboxCache",
    "SandboxProfile",
    "SkippedPath",
    "abi_version",
    "effective_rules",
    "expand_path",
    "gaps",
    "install_default_profile",
    "load_profile",
    "load_profile_file",
    "parse_profile",
    "parse_profile_text",
    "prepare",
    "sandbox_env",
    "with_command",
]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'registry_core.sandbox' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"registry_core.sandbox.{module}"), name)
    globals()[name] = value  # found once
    return value
