"""The sandbox half of the dispatcher: profiles, effective rules and Landlock.

Typical use by a dispatcher (one :class:`SandboxCache` per program)::

    profile = load_profile(env)                      # installs the default on first use
    rules = effective_rules(profile, env, cwd)       # templates expanded
    sandbox = cache.get(rules)                       # ruleset built in this process
    Popen(argv, cwd=cwd, env=sandbox_env(rules, env) | extra,
          preexec_fn=sandbox.preexec)                # child: no_new_privs + restrict_self

Modules: :mod:`.profile` (YAML, validation), :mod:`.rules` (templates),
:mod:`.ldd`, :mod:`.landlock` (ctypes syscalls), :mod:`.apply` (ruleset and
environment), :mod:`.describe` (``ollie-tools sandbox show``).
"""

from __future__ import annotations

from registry_core.sandbox.apply import (
    ACCESS_RIGHTS,
    ALWAYS_PASSED,
    SandboxCache,
    gaps,
    prepare,
    sandbox_env,
)
from registry_core.sandbox.describe import describe, format_text
from registry_core.sandbox.landlock import PreparedSandbox, abi_version
from registry_core.sandbox.ldd import LddResolver, LddResult
from registry_core.sandbox.profile import (
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
    "describe",
    "effective_rules",
    "expand_path",
    "format_text",
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
