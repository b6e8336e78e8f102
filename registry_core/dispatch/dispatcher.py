"""The dispatcher: "the model sees a typed function; the runtime sees an exec call".

One call: validate the arguments against the tool's ``args`` schema, resolve
the executable, then either build the Landlock sandbox (the default) or pass
the elevation gates (``elevated`` / ``sudo``) and run the tool with its
arguments as one JSON object on stdin.

Thread-safety: a :class:`Dispatcher` may be used from several threads; its
caches (parsed profiles, effective rules, Landlock rulesets) are guarded by a
lock.
"""

from __future__ import annotations

import json
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from registry_core import paths
from registry_core.dispatch.fastvalid import certainly_valid
from registry_core.dispatch.gate import (
    ElevationGate,
    ElevationRequest,
    Kind,
    RefusingGate,
    require_askpass,
    sudo_argv,
)
from registry_core.dispatch.output import content_blocks, decode
from registry_core.dispatch.process import OUTPUT_LIMIT, ProcessResult, run_process
from registry_core.dispatch.result import CallResult
from registry_core.errors import (
    ArgumentsError,
    ElevationDeniedError,
    ExecutableChangedError,
    ExecutableError,
    SandboxError,
    ToolChangedError,
)
from registry_core.pinned import CHANGED_MARK, EXIT_CHANGED, approved_argv, clean_env
from registry_core.registry import Registry, Tool
from registry_core.registry.hostfacts import is_executable_file
from registry_core.registry.jsonpos import format_path
from registry_core.registry.schema import validator_for
from registry_core.safe_open import FileTooLargeError, read_regular
from registry_core.sandbox import (
    Access,
    EffectiveRules,
    LddResolver,
    PreparedSandbox,
    SandboxCache,
    SandboxProfile,
    effective_rules,
    load_profile,
    parse_profile_text,
    sandbox_env,
    with_command,
)
from registry_core.sandbox.contain import (
    Launch,
    contain,
    find_bwrap,
    missing_bwrap_gap,
    unavailable_error,
)
from registry_core.sandbox.guard import guard_broker_socket
from registry_core.sandbox.limits import CallLimits, call_limits, set_rlimits, stopped_by_limit
from registry_core.sandbox.mounts import TMP
from registry_core.sandbox.pinning import PinnedDirectory, pinned, same_directory
from registry_core.sandbox.profiles import MAX_PROFILE_BYTES
from registry_core.sandbox.protected import refuse_protected_rules
from registry_core.sandbox.scope import (
    Scope,
    find_scope,
    scope_not_created,
    scoped_command,
    unscoped_note,
)
from registry_core.sandbox.workdir import check_working_directory
from registry_core.trusted import trusted_program

DEFAULT_TIMEOUT = 60.0
_NO_NAMESPACES = "{0.feature}: {0.reason}".format(missing_bwrap_gap())


class CallOptions(NamedTuple):
    cwd: str
    timeout: float = DEFAULT_TIMEOUT
    elevated: bool = False
    profile: str = "default"
    limit: int = OUTPUT_LIMIT
    # The agent/client the call came through (e.g. an MCP client's name): the broker
    # shows it in the approval dialog and the audit log.
    client: str | None = None
    # Called with the tool's pid (= its process group) once it runs: a cancel hook.
    on_start: Callable[[int], None] | None = None


def validate_args(tool: Tool, args: Any) -> None:
    """Raise :class:`ArgumentsError` naming the field when ``args`` violates the schema."""
    if not isinstance(args, dict):
        raise ArgumentsError(tool.name, "(arguments)", "must be a JSON object")
    if certainly_valid(tool.args, args):
        return
    import jsonschema.exceptions  # the full validator decides and explains

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


def _read_bounded(path: Path) -> bytes | None:
    try:
        return read_regular(path, limit=MAX_PROFILE_BYTES + 1, follow_symlinks=True)
    except FileTooLargeError:
        return b"\0" * (MAX_PROFILE_BYTES + 1)  # the profile parser reports it as too large
    except OSError:
        return None


class RulesCache:
    """Parsed profiles and effective rules, reused while their inputs are unchanged.

    Parsing a YAML profile costs more than running a small tool, so the parse
    is memoized -- keyed by the file's exact bytes, which are re-read on every
    call: an edited profile applies to the very next call, with no reliance on
    timestamps.  Only names that :func:`load_profile` once accepted take the
    fast path; anything unusual (a missing file, the default not installed
    yet, an oversized or non-UTF-8 file) goes through :func:`load_profile`,
    which installs, or raises its precise :class:`ProfileError`.

    Effective rules are a pure function of (profile, environment, cwd);
    ``advanced.ldd`` is applied per call (:func:`with_command`).
    Not thread-safe: the dispatcher holds its lock around every use.
    """

    def __init__(self, max_entries: int = 32) -> None:
        self._max = max_entries
        self._known: set[Path] = set()
        self._profiles: OrderedDict[tuple[str, str, str], SandboxProfile] = OrderedDict()
        self._rules: OrderedDict[Hashable, EffectiveRules] = OrderedDict()

    def _remember(self, table: OrderedDict[Any, Any], key: Hashable, value: Any) -> None:
        table[key] = value
        while len(table) > self._max:
            table.popitem(last=False)

    def profile(self, env: Mapping[str, str], name: str) -> SandboxProfile:
        path = paths.sandbox_profile_path(env, name)
        raw = _read_bounded(path) if path in self._known else None
        if raw is None or len(raw) > MAX_PROFILE_BYTES:
            profile = load_profile(env, name)
            self._known.add(path)
            return profile
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            return load_profile(env, name)
        key = (text, name, str(path))
        cached = self._profiles.get(key)
        if cached is not None:
            self._profiles.move_to_end(key)
            return cached
        profile = parse_profile_text(text, name=name, source=str(path))
        self._remember(self._profiles, key, profile)
        return profile

    def rules(self, profile: SandboxProfile, env: Mapping[str, str], cwd: str) -> EffectiveRules:
        key = (profile, cwd, frozenset(env.items()))
        cached = self._rules.get(key)
        if cached is not None:
            self._rules.move_to_end(key)
            return cached
        rules = effective_rules(profile, env, cwd)
        self._remember(self._rules, key, rules)
        return rules


class Dispatcher:
    """Runs tools from a registry snapshot supplied by ``registry``.

    ``env`` defaults to a copy of this process's environment, ``gate`` to one that
    refuses every elevation; ``find_bwrap`` says how to find bubblewrap (``None``:
    not installed) and is replaced by tests, as ``sudo`` (the absolute path of the
    sudo program; ``None``: the trusted one of a system directory, never ``PATH``).
    ``python`` is the interpreter of the pinned exec of elevated and sudo tools
    (:mod:`registry_core.pinned`; ``None``: the trusted system ``python3``).
    ``find_scope`` finds the session's systemd user manager, looked up for each
    call (:mod:`registry_core.sandbox.scope`; ``None``: rlimits only).
    """

    def __init__(
        self,
        registry: Callable[[], Registry],
        env: Mapping[str, str] | None = None,
        gate: ElevationGate | None = None,
        askpass: str | None = None,
        find_bwrap: Callable[[Mapping[str, str]], str | None] = find_bwrap,
        sudo: str | None = None,
        python: str | None = None,
        find_scope: Callable[[Mapping[str, str]], Scope | None] = find_scope,
    ) -> None:
        self.registry = registry
        self.env: Mapping[str, str] = dict(os.environ) if env is None else env
        self.gate: ElevationGate = RefusingGate() if gate is None else gate
        self.askpass = askpass
        self.find_bwrap = find_bwrap
        self.find_scope = find_scope
        self.sudo = sudo
        self.python = python
        self._cache = SandboxCache()
        self._rules = RulesCache()
        self._ldd = LddResolver()
        self._lock = threading.Lock()
        self._bwrap: str | None = None
        self._bwrap_checked = False

    def __repr__(self) -> str:
        return f"Dispatcher(registry={self.registry!r}, askpass={self.askpass!r})"

    def bwrap(self) -> str | None:
        """The namespace builder (looked up once), or ``None`` when not installed."""
        if not self._bwrap_checked:
            self._bwrap = self.find_bwrap(self.env)
            self._bwrap_checked = True
        return self._bwrap

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
        try:
            validate_args(tool, args)
        except ToolChangedError:
            # The .meta changed after that snapshot was taken: use a new one (once).
            registry = self.registry()
            tool = registry.usable(name)
            validate_args(tool, args)
        executable = tool.executable_file
        if executable is None:
            raise ExecutableError(f"{name}: {tool.resolution_detail or 'no executable found'}")
        if not is_executable_file(executable):
            raise ExecutableError(f"{name}: {executable} is missing or not executable")
        stdin = json.dumps(args).encode()
        cwd = os.path.abspath(options.cwd)
        extra = self.tool_env(registry)
        extra["PWD"] = cwd
        if tool.sudo:
            return self._run_sudo(tool, executable, args, stdin, extra, options)
        if tool.elevated or options.elevated:
            return self._run_elevated(tool, executable, args, stdin, extra, options)
        # Opened once, without following a symlink: every later decision is about
        # this directory, whatever its path names by then (finding 4).
        with pinned(cwd) as workdir:
            check_working_directory(workdir.path, self.env, registry.dirs, resolved=True)
            extra["PWD"] = workdir.path
            return self._run_sandboxed(
                tool, executable, stdin, extra, options, registry.dirs, workdir
            )

    def _finish(
        self,
        tool: Tool,
        argv: list[str],
        result: ProcessResult,
        options: CallOptions,
        limits: CallLimits | None = None,
        scoped: bool = False,
        **flags: Any,
    ) -> CallResult:
        # The marker names the limit that actually applied (CallOptions.limit).
        stdout = decode(result.stdout, result.stdout_dropped, options.limit)
        stderr = decode(result.stderr, result.stderr_dropped, options.limit)
        note = None if limits is None else stopped_by_limit(result.exit_code, limits, scoped=scoped)
        if note is not None and not result.timed_out:
            stderr += ("\n" if stderr and not stderr.endswith("\n") else "") + note
        if result.timed_out:
            # On a line of its own, after the tool's last line (ended or not).
            if stderr and not stderr.endswith("\n"):
                stderr += "\n"
            stderr += f"timed out after {options.timeout:g} s"
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
        self,
        tool: Tool,
        executable: str,
        stdin: bytes,
        extra: dict[str, str],
        options: CallOptions,
        tools_dirs: Sequence[str | Path],
        workdir: PinnedDirectory,
    ) -> CallResult:
        cwd = workdir.path
        bwrap = self.bwrap()
        template_env = {**self.env, **extra}
        if bwrap is not None:
            template_env["TMPDIR"] = TMP  # the tool's private /tmp
        with self._lock:
            profile = self._rules.profile(self.env, options.profile)
            # Templates see the dispatcher's environment plus the tools path actually in use.
            rules = self._rules.rules(profile, template_env, cwd)
            # The tool may always run (and read) its own executable, wherever cmd points;
            # advanced.ldd adds that executable's libraries.
            rules = with_command(
                rules, executable, origin="tool executable", always=True, libraries=self._ldd
            )
            private = (TMP,) if bwrap is not None else ()
            guard_broker_socket(rules, self.env, private=private)
            # Never Ollie's own configuration, state, tools or installation (finding 5).
            refuse_protected_rules(profile, template_env, cwd, tools_dirs, private=private)
            abi = self._cache.abi
            sandbox = None if bwrap is not None else self._uncontained(rules)
        env = sandbox_env(rules, self.env)
        if "PATH" in env:
            env["PATH"] = sandbox_path(rules, env["PATH"])
        env.update(extra)
        argv = [executable]
        if sandbox is not None:
            limits = call_limits(rules.limits, options.timeout)

            def preexec() -> None:
                sandbox.preexec()
                set_rlimits(limits)
                same_directory(workdir)  # subprocess changed into cwd by its path

            result = _spawn(argv, stdin, env, cwd, options, preexec=preexec)
            unenforced = (_NO_NAMESPACES, *sandbox.report.unenforced)
            return self._finish(
                tool,
                argv,
                result,
                options,
                limits,
                sandboxed=sandbox.enforcing,
                unenforced=unenforced,
            )
        assert bwrap is not None
        if "TMPDIR" in env:
            env["TMPDIR"] = TMP
        limits = call_limits(rules.limits, options.timeout)
        scope = self.find_scope(self.env)
        unscoped: tuple[str, ...] = ()
        while True:
            launch = contain(
                rules,
                bwrap=bwrap,
                executable=executable,
                cwd=cwd,
                private_tmp_base=paths.sandbox_tmp_base(self.env),
                broker_socket=extra["OLLIE_ELEVATE_SOCKET"],
                abi=abi,
                limits=limits,
                filter_cache=paths.cache_home(self.env) / "ollie",
                workdir=workdir,
            )
            try:
                outcome = _run_launch(launch, scope, limits, stdin, env, cwd, options)
            finally:
                launch.close()
            if isinstance(outcome, str):
                # systemd-run made no scope and the tool never ran: run it without (rlimits hold).
                scope, unscoped = None, (unscoped_note(outcome),)
                continue
            result = outcome
            break
        return self._finish(
            tool,
            argv,
            result,
            options,
            limits,
            scoped=scope is not None,
            sandboxed=launch.sandbox.enforcing,
            unenforced=(*launch.sandbox.report.unenforced, *unscoped),
        )

    def _uncontained(self, rules: EffectiveRules) -> PreparedSandbox:
        """Landlock only (no bwrap): refused unless the profile allows best effort."""
        if not rules.best_effort:
            raise unavailable_error(rules)
        return self._cache.get(rules)

    def _pinned(self, executable: str) -> tuple[str, str]:
        """The trusted ``python3`` of the pinned exec and ``executable``'s sha256 now."""
        from registry_core.broker.remember.policies import file_sha256  # the elevated path only

        python = trusted_program("python3") if self.python is None else self.python
        sha256 = file_sha256(executable)
        if sha256 is None:
            raise ExecutableError(f"{executable}: cannot be read to compute its sha256")
        return python, sha256

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
        python, sha256 = self._pinned(executable)
        argv = approved_argv(python, sha256, executable)
        request = ElevationRequest(
            tool.name, Kind.SANDBOX, tuple(argv), args, cwd, client=options.client
        )
        self.gate.authorize(request)
        env = clean_env({**self.env, **extra})
        result = _spawn(argv, stdin, env, cwd, options)
        _check_pinned(tool, result)
        return self._finish(tool, argv, result, options, sandboxed=False, elevated=True)

    def _run_sudo(
        self,
        tool: Tool,
        executable: str,
        args: Any,
        stdin: bytes,
        extra: dict[str, str],
        options: CallOptions,
    ) -> CallResult:
        require_askpass(self.askpass)
        cwd = extra["PWD"]
        python, sha256 = self._pinned(executable)
        argv = sudo_argv(executable, sha256, self.sudo, python)
        request = ElevationRequest(
            tool.name, Kind.SUDO, tuple(argv), args, cwd, client=options.client
        )
        grant = self.gate.authorize(request)
        env = {**clean_env({**self.env, **extra}), **grant.env}
        if self.askpass:
            env["SUDO_ASKPASS"] = self.askpass
        result = _spawn(argv, stdin, env, cwd, options)
        if grant.grant:
            auth_failed = b"incorrect password attempt" in result.stderr or (
                result.exit_code == 1 and b"a password is required" in result.stderr
            )
            refused = self.gate.report_sudo(grant.grant, result.exit_code, auth_failed)
            if refused is not None:
                # The credential gate said no: sudo never ran the tool.
                raise ElevationDeniedError(refused)
        _check_pinned(tool, result)
        return self._finish(tool, argv, result, options, sandboxed=False, elevated=True, sudo=True)


def _check_pinned(tool: Tool, result: ProcessResult) -> None:
    """Raise :class:`ExecutableChangedError` when the pinned exec refused to run the file."""
    if result.exit_code != EXIT_CHANGED or result.timed_out:
        return
    first = result.stderr.split(b"\n", 1)[0].decode("utf-8", "replace")
    if first.startswith(CHANGED_MARK):
        raise ExecutableChangedError(tool.name, first.removeprefix(CHANGED_MARK))


def _run_launch(
    launch: Launch,
    scope: Scope | None,
    limits: CallLimits,
    stdin: bytes,
    env: Mapping[str, str],
    cwd: str,
    options: CallOptions,
) -> ProcessResult | str:
    """Run ``launch``, in a cgroup scope when ``scope`` is given.

    Returns systemd-run's reason instead of a result when it could not create
    the scope (the sandbox never started, so the tool did not run).
    """
    command, command_env = launch.argv, env
    if scope is not None:
        command, command_env = scoped_command(scope, launch.argv, env, limits)
    result = _spawn(command, stdin, command_env, cwd, options, pass_fds=launch.pass_fds)
    if not result.timed_out:
        try:
            launch.check(result.stderr)
        except SandboxError:
            reason = None if scope is None else scope_not_created(result.exit_code, result.stderr)
            if reason is None:
                raise
            return reason
    return result


def _spawn(
    argv: Sequence[str],
    stdin: bytes,
    env: Mapping[str, str],
    cwd: str,
    options: CallOptions,
    *,
    preexec: Callable[[], None] | None = None,
    pass_fds: Sequence[int] = (),
) -> ProcessResult:
    """Run one tool process with the call's timeout, output limit and start hook."""
    return run_process(
        argv,
        stdin,
        env=env,
        cwd=cwd,
        timeout=options.timeout,
        limit=options.limit,
        preexec=preexec,
        pass_fds=pass_fds,
        on_start=options.on_start,
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
