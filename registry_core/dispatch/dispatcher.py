"""The dispatcher: "the model sees a typed function; the runtime sees an exec call".

One call: validate the arguments against the tool's ``args`` schema, resolve
the executable, then either build the Landlock sandbox (the default) or pass
the elevation gates (``elevated`` / ``sudo``) and run the tool with its
arguments as one JSON object on stdin.

Thread-safety: a :class:`Dispatcher` may be used from several threads; the
sandbox cache is guarded by a lock.
"""

from __future__ import annotations

import dataclasses
import json
import os
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import jsonschema

from registry_core import paths
from registry_core.dispatch.gate import (
    ElevationGate,
    ElevationRequest,
    Kind,
    RefusingGate,
    sudo_argv,
)
from registry_core.dispatch.output import content_blocks, decode
from registry_core.dispatch.process import OUTPUT_LIMIT, run_process
from registry_core.dispatch.result import CallResult
from registry_core.errors import ArgumentsError, ExecutableError
from registry_core.registry import Registry, Tool
from registry_core.registry.hostfacts import is_executable_file
from registry_core.registry.jsonpos import format_path
from registry_core.registry.schema import validator_for
from registry_core.sandbox import (
    Access,
    EffectiveRules,
    PathRule,
    SandboxCache,
    effective_rules,
    load_profile,
    sandbox_env,
)

DEFAULT_TIMEOUT = 60.0


@dataclass(frozen=True)
class CallOptions:
    cwd: str
    timeout: float = DEFAULT_TIMEOUT
    elevated: bool = False
    profile: str = "default"
    limit: int = OUTPUT_LIMIT


def validate_args(tool: Tool, args: Any) -> None:
    """Raise :class:`ArgumentsError` naming the field when ``args`` violates the schema."""
    if not isinstance(args, dict):
        raise ArgumentsError(tool.name, "(arguments)", "must be a JSON object")
    validator = validator_for(dict(tool.args))
    errors = sorted(validator.iter_errors(args), key=lambda e: list(e.path))
    if not errors:
        return
    err = jsonschema.exceptions.best_match(errors) or errors[0]
    where = list(err.path)
    if err.validator == "required" and isinstance(err.validator_value, list):
        instance = err.instance if isinstance(err.instance, dict) else {}
        missing = [k for k in err.validator_value if k not in instance]
        where = [*where, missing[0]] if missing else where
        raise ArgumentsError(tool.name, format_path(where), "is required")
    raise ArgumentsError(tool.name, format_path(where), err.message)


def _beneath(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def sandbox_path(rules: EffectiveRules, path_value: str) -> str:
    """``$PATH`` keeping only directories the sandbox lets a tool execute from.

    Shims such as pyenv's live in directories the sandbox cannot run from;
    dropping them lets ``#!/usr/bin/env python3`` find an interpreter that works.
    """
    exec_roots = [r.path for r in rules.paths if r.access in (Access.ROX, Access.RWX)]
    dirs = [d for d in path_value.split(":") if d]
    return ":".join(d for d in dirs if any(_beneath(d, root) for root in exec_roots))


@dataclass
class Dispatcher:
    """Runs tools from a registry snapshot supplied by ``registry``."""

    registry: Callable[[], Registry]
    env: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    gate: ElevationGate = field(default_factory=RefusingGate)
    askpass: str | None = None
    _cache: SandboxCache = field(default_factory=SandboxCache, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    def tool_env(self, registry: Registry) -> dict[str, str]:
        """The variables every tool gets (spec): tools path, broker socket."""
        tools_path = ":".join(str(d) for d in registry.dirs) or paths.tools_path_string(self.env)
        return {
            "OLLIE_TOOLS_PATH": tools_path,
            "OLLIE_ELEVATE_SOCKET": str(paths.elevate_socket(self.env)),
        }

    def call(self, name: str, args: Any, options: CallOptions) -> CallResult:
        registry = self.registry()
        tool = registry.usable(name)
        validate_args(tool, args)
        executable = tool.executable
        if executable is None:
            raise ExecutableError(f"{name}: {tool.resolution_detail or 'no executable found'}")
        if not is_executable_file(str(executable)):
            raise ExecutableError(f"{name}: {executable} is missing or not executable")
        stdin = json.dumps(args).encode()
        cwd = os.path.abspath(options.cwd)
        extra = self.tool_env(registry)
        extra["PWD"] = cwd
        if tool.sudo:
            return self._run_sudo(tool, str(executable), args, stdin, extra, options)
        if tool.elevated or options.elevated:
            return self._run_elevated(tool, str(executable), args, stdin, extra, options)
        return self._run_sandboxed(tool, str(executable), stdin, extra, options)

    def _finish(self, tool: Tool, argv: list[str], result: Any, **flags: Any) -> CallResult:
        stdout = decode(result.stdout, result.stdout_dropped, OUTPUT_LIMIT)
        stderr = decode(result.stderr, result.stderr_dropped, OUTPUT_LIMIT)
        if result.timed_out:
            stderr = (
                stderr + "\n" if stderr else ""
            ) + f"timed out after {flags.pop('timeout'):g} s"
        flags.pop("timeout", None)
        blocks, structured = content_blocks(stdout, stderr, result)
        return CallResult(
            tool=tool.name,
            exit_code=result.exit_code if not result.timed_out else 124,
            stdout=stdout,
            stderr=stderr,
            content=blocks,
            structured=structured,
            timed_out=result.timed_out,
            truncated=bool(result.stdout_dropped or result.stderr_dropped),
            duration=result.duration,
            argv=tuple(argv),
            **flags,
        )

    def _run_sandboxed(
        self, tool: Tool, executable: str, stdin: bytes, extra: dict[str, str], options: CallOptions
    ) -> CallResult:
        cwd = extra["PWD"]
        profile = load_profile(self.env, options.profile)
        # Templates see the dispatcher's environment plus the tools path actually in use.
        rules = effective_rules(profile, {**self.env, **extra}, cwd)
        # The tool may always run (and read) its own executable, wherever cmd points.
        own = PathRule(executable, Access.ROX, "tool executable")
        rules = dataclasses.replace(rules, paths=(*rules.paths, own))
        with self._lock:
            sandbox = self._cache.get(rules)
        env = sandbox_env(rules, self.env)
        if "PATH" in env:
            env["PATH"] = sandbox_path(rules, env["PATH"])
        env.update(extra)
        argv = [executable]
        result = run_process(
            argv,
            stdin,
            env=env,
            cwd=cwd,
            timeout=options.timeout,
            limit=options.limit,
            preexec=sandbox.preexec,
        )
        return self._finish(
            tool,
            argv,
            result,
            timeout=options.timeout,
            sandboxed=sandbox.enforcing,
            unenforced=sandbox.report.unenforced,
        )

    def _run_elevated(
        self,
        tool: Tool,
        executable: str,
        args: Any,
        stdin: bytes,
        extra: dict[str, str],
        options: CallOptions,
    ) -> CallResult:
        cwd = extra["PWD"]
        argv = [executable]
        request = ElevationRequest(tool.name, Kind.SANDBOX, tuple(argv), args, cwd)
        self.gate.authorize(request)
        env = {**self.env, **extra}
        result = run_process(
            argv, stdin, env=env, cwd=cwd, timeout=options.timeout, limit=options.limit
        )
        return self._finish(
            tool, argv, result, timeout=options.timeout, sandboxed=False, elevated=True
        )

    def _run_sudo(
        self,
        tool: Tool,
        executable: str,
        args: Any,
        stdin: bytes,
        extra: dict[str, str],
        options: CallOptions,
    ) -> CallResult:
        cwd = extra["PWD"]
        argv = sudo_argv(executable)
        request = ElevationRequest(tool.name, Kind.SUDO, tuple(argv), args, cwd)
        grant = self.gate.authorize(request)
        env = {**self.env, **extra, **grant.env}
        if self.askpass:
            env["SUDO_ASKPASS"] = self.askpass
        result = run_process(
            argv, stdin, env=env, cwd=cwd, timeout=options.timeout, limit=options.limit
        )
        if grant.grant:
            auth_failed = b"incorrect password attempt" in result.stderr or (
                result.exit_code == 1 and b"a password is required" in result.stderr
            )
            self.gate.report_sudo(grant.grant, result.exit_code, auth_failed)
        return self._finish(
            tool, argv, result, timeout=options.timeout, sandboxed=False, elevated=True, sudo=True
        )


def parallel_safe(registry: Registry, names: list[str]) -> bool:
    """May these calls run at the same time? Only when every tool is ``readOnly``."""
    return all(registry.usable(n).read_only for n in names)


def plan_batches(registry: Registry, names: list[str]) -> list[list[int]]:
    """Group call indices into batches: consecutive readOnly calls share a batch."""
    batches: list[list[int]] = []
    for index, name in enumerate(names):
        read_only = registry.usable(name).read_only
        if (
            read_only
            and batches
            and batches[-1]
            and registry.usable(names[batches[-1][-1]]).read_only
        ):
            batches[-1].append(index)
        else:
            batches.append([index])
    return batches
