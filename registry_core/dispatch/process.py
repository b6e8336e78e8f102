"""Run one child process: JSON on stdin, bounded stdout/stderr capture, group timeout.

The child gets its own session (and so its own process group), which is what
a timeout kills: a tool that forks helpers cannot leave them behind.  Output
beyond ``limit`` bytes per stream is drained and dropped (so the child never
blocks on a full pipe) and counted, for a visible marker.
"""

from __future__ import annotations

import contextlib
import os
import select
import selectors
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from typing import NamedTuple

from registry_core.errors import ExecutableError

OUTPUT_LIMIT = 10 * 1024 * 1024
_KILL_GRACE = 2.0
_CHUNK = 65536


class ProcessResult(NamedTuple):
    exit_code: int
    stdout: bytes
    stderr: bytes
    stdout_dropped: int
    stderr_dropped: int
    timed_out: bool
    duration: float


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=_KILL_GRACE)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)


def _wait(proc: subprocess.Popen[bytes], timeout: float) -> int | None:
    """The exit status, or ``None`` if the child is still running after ``timeout`` seconds.

    ``Popen.wait(timeout=...)`` polls with growing sleeps, which adds up to
    milliseconds to every call; a pidfd becomes readable the moment the child
    exits.
    """
    status = proc.poll()
    if status is not None:
        return status
    try:
        pidfd = os.pidfd_open(proc.pid)
    except OSError:  # kernel without pidfd_open (< 5.3): Popen's polling wait
        try:
            return proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None
    try:
        exited, _, _ = select.select([pidfd], [], [], timeout)
    finally:
        os.close(pidfd)
    return proc.wait() if exited else None


def run_process(
    argv: Sequence[str],
    stdin: bytes,
    *,
    env: Mapping[str, str],
    cwd: str,
    timeout: float,
    limit: int = OUTPUT_LIMIT,
    preexec: Callable[[], None] | None = None,
    pass_fds: Sequence[int] = (),
    on_start: Callable[[int], None] | None = None,
) -> ProcessResult:
    """Start ``argv``, feed ``stdin``, capture bounded output; raise only if it cannot start.

    ``on_start`` receives the child's pid (also its process group id) as soon as it
    runs: a caller on another thread can cancel the call by killing that group
    (``ollie-tools mcp`` does when the client cancels); the loop below then sees the
    pipes close and returns the killed status.
    """
    start = time.monotonic()
    try:
        proc = subprocess.Popen(
            list(argv),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=dict(env),
            cwd=cwd,
            start_new_session=True,
            preexec_fn=preexec,  # noqa: PLW1509 (only Landlock syscalls, no Python-level locks)
            pass_fds=tuple(pass_fds),
            close_fds=True,
        )
    except subprocess.SubprocessError as exc:
        # preexec failures (e.g. Landlock refused) arrive here: never run unsandboxed.
        raise ExecutableError(f"could not start {argv[0]}: {exc}") from exc
    except OSError as exc:
        raise ExecutableError(f"could not start {argv[0]}: {exc.strerror}") from exc
    assert proc.stdin and proc.stdout and proc.stderr  # noqa: PT018 (pipes requested above)
    if on_start is not None:
        on_start(proc.pid)

    buffers = {proc.stdout.fileno(): bytearray(), proc.stderr.fileno(): bytearray()}
    dropped = dict.fromkeys(buffers, 0)
    pending = memoryview(stdin)
    sel = selectors.DefaultSelector()
    os.set_blocking(proc.stdin.fileno(), False)
    for stream in (proc.stdout, proc.stderr):
        sel.register(stream, selectors.EVENT_READ)
    if pending:
        sel.register(proc.stdin, selectors.EVENT_WRITE)
    else:
        proc.stdin.close()
    deadline = start + timeout
    timed_out = False
    try:
        while sel.get_map():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                timed_out = True
                break
            for key, _ in sel.select(remaining):
                fileobj = key.fileobj
                if fileobj is proc.stdin:
                    try:
                        written = os.write(proc.stdin.fileno(), pending[:_CHUNK])
                    except BrokenPipeError:
                        written = len(pending)
                    pending = pending[written:]
                    if not pending:
                        sel.unregister(proc.stdin)
                        proc.stdin.close()
                    continue
                fd = key.fd
                data = os.read(fd, _CHUNK)
                if not data:
                    sel.unregister(fileobj)
                    continue
                room = limit - len(buffers[fd])
                buffers[fd] += data[: max(room, 0)]
                dropped[fd] += max(len(data) - max(room, 0), 0)
    finally:
        sel.close()
        if timed_out:
            _kill_group(proc)
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            if not stream.closed:
                stream.close()
    if timed_out:
        exit_code = proc.wait()
    else:
        status = _wait(proc, max(deadline - time.monotonic(), 0.1))
        if status is None:
            timed_out = True
            _kill_group(proc)
            status = proc.wait()
        exit_code = status
    out_fd, err_fd = list(buffers)
    return ProcessResult(
        exit_code=exit_code,
        stdout=bytes(buffers[out_fd]),
        stderr=bytes(buffers[err_fd]),
        stdout_dropped=dropped[out_fd],
        stderr_dropped=dropped[err_fd],
        timed_out=timed_out,
        duration=time.monotonic() - start,
    )
