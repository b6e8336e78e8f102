"""Namespaces around Landlock: one contained launch of a tool through bubblewrap.

``bwrap`` builds fresh user, mount, PID, IPC, UTS and cgroup namespaces (and a
network namespace when the profile allows no network) with the mount view of
:mod:`.mounts`; inside, the exec step (:mod:`.execstep`) applies the per-call
Landlock ruleset built here in the parent, then execs the tool; bwrap loads
the call's seccomp filter (:mod:`.seccomp`) just before it.  Use::

    launch = contain(rules, bwrap=..., cwd=..., env=..., private_tmp_base=...)
    try:
        result = run_process(launch.argv, ..., pass_fds=launch.pass_fds)
        launch.check(result.stderr)       # raises SandboxError if setup failed
    finally:
        launch.close()                    # ruleset, pipe, private /tmp removed

Nothing outlives the call: bwrap runs as the namespace's init and the kernel
kills every process of a PID namespace when its init exits;
``--die-with-parent`` ties that to the dispatcher.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import stat
import sys
from collections.abc import Mapping
from pathlib import Path

from registry_core.errors import NamespacesUnavailableError, SandboxError, SeccompUnavailableError
from registry_core.sandbox import execstep, landlock, seccomp
from registry_core.sandbox.apply import ACCESS_RIGHTS, prepare
from registry_core.sandbox.landlock import PreparedSandbox
from registry_core.sandbox.limits import CallLimits
from registry_core.sandbox.mounts import View, plan_view
from registry_core.sandbox.pinning import OpenedPaths, PinnedDirectory
from registry_core.sandbox.profiles import NetworkMode
from registry_core.sandbox.report import Gap, SkippedPath
from registry_core.sandbox.rules import EffectiveRules
from registry_core.trusted import SYSTEM_DIRS, find_trusted

PACKAGE = "bubblewrap"
_NAMESPACES = (
    "--unshare-user",
    "--unshare-ipc",
    "--unshare-pid",
    "--unshare-uts",
    "--unshare-cgroup-try",
    "--die-with-parent",
    "--disable-userns",
)


def find_bwrap(env: Mapping[str, str]) -> str | None:
    """The trusted ``bwrap`` of a system directory (see :mod:`registry_core.trusted`),
    or ``None`` when none is installed there or it could be replaced by someone other
    than root.

    ``env`` (the dispatcher's environment, the hook's signature) is deliberately not
    consulted: the agent's ``PATH`` often starts with a project directory a tool can
    write, and a ``bwrap`` planted there would run outside any sandbox.
    """
    return find_trusted("bwrap")


_NOT_TRUSTED = "not installed in a system directory Ollie trusts"
_WHERE = f"{', '.join(SYSTEM_DIRS)}; the file and its directories root's, writable by root alone"


def missing_bwrap_gap() -> Gap:
    return Gap(
        "namespaces",
        f"bwrap ({PACKAGE}) is {_NOT_TRUSTED}: the session D-Bus, X11, ssh-agent, tmux "
        "and every other socket in /tmp and /run/user stay reachable, the real /tmp is "
        "shared, and processes may outlive the call",
        requested=True,
    )


def unavailable_error(rules: EffectiveRules) -> NamespacesUnavailableError:
    return NamespacesUnavailableError(
        f"sandboxed tools run in namespaces built by bwrap, which is {_NOT_TRUSTED} "
        f"({_WHERE}): "
        f"install the '{PACKAGE}' package (apt/dnf install {PACKAGE}); or set "
        f"'general.best_effort: true' in {rules.source} to run with Landlock only"
    )


@functools.cache
def _exec_step_source() -> str:
    return Path(execstep.__file__).read_text(encoding="utf-8")


@functools.cache
def interpreter() -> tuple[str, tuple[str, ...]]:
    """The Python that runs the exec step, and what must be visible for it to start."""
    exe = os.path.realpath(sys.executable)
    needs = ["/usr", "/lib", "/lib64", "/lib32", "/libx32", "/bin", sys.base_prefix, exe]
    return exe, tuple(dict.fromkeys(needs))


def make_private_tmp(base: Path) -> str:
    """A fresh 0700 directory under ``base`` (created 0700 if missing)."""
    try:
        base.mkdir(mode=0o700, parents=True, exist_ok=True)
        info = os.lstat(base)
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
            raise SandboxError(
                f"{base} is not a directory of this user; refusing to put private /tmp there"
            )
        return _fresh_dir(base)
    except OSError as exc:
        raise SandboxError(
            f"cannot create the call's private /tmp under {base}: {exc.strerror or exc}"
        ) from exc


def _fresh_dir(base: Path) -> str:
    """Create ``base/call-<random>`` (0700, never an existing name) and return its
    absolute path: ``tempfile.mkdtemp``'s guarantee, without importing it."""
    for _ in range(100):
        candidate = os.path.abspath(os.path.join(base, f"call-{os.urandom(6).hex()}"))
        try:
            os.mkdir(candidate, 0o700)
        except FileExistsError:
            continue
        return candidate
    raise FileExistsError(errno.EEXIST, "no unused name for a private /tmp", str(base))


def remove_tree(path: str) -> None:
    """Remove ``path`` even where the tool took its own permissions away (chmod 000)."""
    with contextlib.suppress(OSError):
        os.chmod(path, 0o700)
    try:
        os.rmdir(path)  # the usual case: the tool left its /tmp empty
        return
    except FileNotFoundError:
        return
    except OSError:
        pass
    for root, dirs, _ in os.walk(path):
        for name in dirs:
            # ``dirs`` holds symlinks to directories too: never follow them.  Python
            # cannot chmod a symlink itself on Linux and raises NotImplementedError.
            with contextlib.suppress(OSError, NotImplementedError):
                os.chmod(os.path.join(root, name), 0o700, follow_symlinks=False)
    # Bottom-up through directory descriptors (``os.fwalk`` never follows a symlink),
    # skipping what cannot be removed, as ``shutil.rmtree(ignore_errors=True)`` does,
    # without importing shutil on every call whose tool left a file behind.
    # Not mutated: a mutant without ``path`` walks the current directory and deletes it.
    with contextlib.suppress(OSError):
        for _, dirs, files, fd in os.fwalk(path, topdown=False):  # pragma: no mutate
            for name in files:
                with contextlib.suppress(OSError):
                    os.unlink(name, dir_fd=fd)
            for name in dirs:
                try:
                    os.rmdir(name, dir_fd=fd)
                except NotADirectoryError:  # a symlink to a directory: the link goes
                    with contextlib.suppress(OSError):
                        os.unlink(name, dir_fd=fd)
                except OSError:
                    pass
    with contextlib.suppress(OSError):
        os.rmdir(path)


class Launch:
    """One prepared, contained launch; :meth:`close` it after the process ended."""

    def __init__(
        self,
        argv: list[str],
        pass_fds: tuple[int, ...],
        sandbox: PreparedSandbox,
        view: View,
        private_tmp: str,
        _status_read: int,
        _status_write: int,
        _filter: int = -1,
        _opened: OpenedPaths | None = None,
    ) -> None:
        self.argv = argv
        self.pass_fds = pass_fds
        self._filter = _filter
        self._opened = _opened
        self.sandbox = sandbox
        self.view = view
        self.private_tmp = private_tmp
        self._status_read = _status_read
        self._status_write = _status_write
        self._closed = False

    def check(self, stderr: bytes) -> None:
        """Raise :class:`SandboxError` when the sandbox never got in place."""
        os.set_blocking(self._status_read, False)
        try:
            ok = os.read(self._status_read, 1) == b"1"
        except BlockingIOError:
            ok = False
        if not ok:
            text = stderr.decode(errors="replace").strip() or "no message"
            raise SandboxError(f"the sandbox could not be set up (bwrap): {text}")

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for fd in (self._status_read, self._status_write, self._filter):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self.sandbox.close()
        if self._opened is not None:
            self._opened.close()
        remove_tree(self.private_tmp)


def _proc_arguments(view: View, sandbox: PreparedSandbox) -> list[str]:
    """``N MASK PATH ...`` of the exec step: the rules on the fresh ``/proc``.

    Masks are final: a path that is a file on the host's ``/proc`` is a file
    in the fresh one too, so only file rights are kept for it.
    """
    if sandbox.fd is None:
        return ["0"]
    handled = landlock.fs_access_for_abi(min(sandbox.abi, landlock.MAX_KNOWN_ABI))
    pairs: list[str] = []
    for rule in view.proc_rules:
        rights = ACCESS_RIGHTS[rule.access] & handled
        try:
            if not stat.S_ISDIR(os.stat(rule.path).st_mode):
                rights &= landlock.FILE_ONLY_ACCESS
        except OSError:
            continue  # per-process entries differ inside; absent here, skipped
        if rights:
            pairs += [str(int(rights)), rule.path]
    return [str(len(pairs) // 2), *pairs]


def exec_step() -> tuple[list[str], tuple[int, ...], tuple[str, ...]]:
    """(command, fds to pass, paths it needs visible) of the exec step."""
    python, needs = interpreter()
    return [python, "-I", "-S", "-c", _exec_step_source(), "-"], (), needs


def contain(
    rules: EffectiveRules,
    *,
    bwrap: str,
    executable: str,
    cwd: str,
    private_tmp_base: Path,
    broker_socket: str | None,
    abi: int | None = None,
    limits: CallLimits | None = None,
    filter_cache: Path | None = None,
    workdir: PinnedDirectory | None = None,
) -> Launch:
    """Prepare the contained launch of ``executable`` under ``rules``.

    ``limits``: the call's rlimits, set by the exec step inside the user namespace.
    ``filter_cache``: where compiled seccomp programs are remembered (Ollie's cache).
    ``workdir``: the pinned working directory (``cwd`` is its path; the caller
    closes it): bound and granted by descriptor, checked again inside.
    """
    program = _filter_program(rules, filter_cache)
    private_tmp = make_private_tmp(private_tmp_base)
    step, step_fds, needs = exec_step()
    options = [f"keyctl={seccomp.keyctl_number()}"]
    if limits is not None:
        options.append(limits.exec_step_options())
    opened = None if workdir is None else OpenedPaths(workdir, [r.path for r in rules.paths])
    if workdir is not None:
        options.append(f"cwd={workdir.identity}")
    step[-1] = ",".join(options)
    try:
        view = plan_view(
            rules,
            cwd=cwd,
            private_tmp=private_tmp,
            broker_socket=broker_socket,
            helper_paths=needs,
            opened=opened,
        )
        fds = None if opened is None else opened.fds
        sandbox = prepare(rules._replace(paths=view.landlock), abi, namespaces=True, opened=fds)
        report = sandbox.report
        if program is None:
            gap = seccomp.missing_filter_gap(seccomp.unavailable_reason() or "no filter")
            report = report._replace(gaps=(gap, *report.gaps))
        if opened is not None and opened.refused:
            links = tuple(SkippedPath(p, _NOT_FOLLOWED) for p in opened.refused)
            report = report._replace(skipped=(*report.skipped, *links))
        sandbox.report = report
    except BaseException:
        remove_tree(private_tmp)
        if opened is not None:
            opened.close()
        raise
    status_read, status_write = os.pipe2(os.O_CLOEXEC)
    ruleset = sandbox.fd if sandbox.fd is not None else -1
    namespaces = list(_NAMESPACES)
    if rules.network.mode is NetworkMode.DENY:
        namespaces.append("--unshare-net")
    filter_fd = -1
    if program is not None:
        filter_fd = seccomp.program_fd(program)
        namespaces += ["--seccomp", str(filter_fd)]
    argv = [
        bwrap,
        *namespaces,
        *view.args,
        "--",
        *step,
        str(status_write),
        str(ruleset),
        *_proc_arguments(view, sandbox),
        executable,
    ]
    passed = (*step_fds, status_write, *(() if ruleset < 0 else (ruleset,)))
    if filter_fd >= 0:
        passed = (*passed, filter_fd)
    if opened is not None:
        passed = (*passed, *opened.fds.values())
    return Launch(
        argv, passed, sandbox, view, private_tmp, status_read, status_write, filter_fd, opened
    )


_NOT_FOLLOWED = "inside the working directory and not a plain path (a symlink is not followed)"


def _filter_program(rules: EffectiveRules, cache: Path | None) -> bytes | None:
    """The call's compiled seccomp filter; ``None`` (best effort only) when none can be built."""
    try:
        plan = seccomp.plan(rules.network.mode, rules.network.bind_tcp)
        return seccomp.program_for(plan, cache)
    except seccomp.FilterUnavailable as exc:
        if rules.best_effort:
            return None
        raise SeccompUnavailableError(
            f"sandboxed tools run under a seccomp filter, and {exc}: install the "
            f"'{seccomp.PACKAGE}' package; or set 'general.best_effort: true' in "
            f"{rules.source} to run without it"
        ) from exc
