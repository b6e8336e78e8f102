"""The working directory is pinned: a tool swapping it for a symlink to $HOME between
the check and the launch never gets $HOME (containment II, finding 4).

A thread exchanges the call's working directory with a symlink to the home
directory as fast as it can (``renameat2(RENAME_EXCHANGE)``, atomic), while
calls run.  On the code before pinning the tool wrote into the home directory
within a few dozen calls: the check resolved the path once, bwrap, Landlock and
the ``chdir`` resolved it again.  Now each call runs in the directory that was
checked or is refused; the home directory is never written.
"""

from __future__ import annotations

import ctypes
import os
import platform
import random
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_dispatch_sandboxed import Stack

from registry_core.errors import OllieError

pytestmark = [
    pytest.mark.realstack,
    pytest.mark.usefixtures("landlock_abi"),
    pytest.mark.skipif(platform.machine() != "x86_64", reason="renameat2's x86-64 number"),
]

_RENAMEAT2, _AT_FDCWD, _RENAME_EXCHANGE = 316, -100, 2
WRITER = "#!/bin/sh\ncat >/dev/null\necho pwned > ./pwned && pwd\n"


@pytest.fixture
def stack(tmp_path: Path) -> Stack:
    if shutil.which("bwrap") is None:
        if os.environ.get("CI") == "true":
            pytest.fail("bwrap is not installed")
        pytest.skip("bwrap is not installed")
    return Stack(tmp_path)


@pytest.fixture
def swapper(stack: Stack) -> Iterator[threading.Event]:
    """Exchanges the working directory with a symlink to $HOME until stopped."""
    decoy = stack.root / "decoy"
    decoy.symlink_to(stack.home)
    libc = ctypes.CDLL(None, use_errno=True)
    stop = threading.Event()
    work, link = bytes(stack.cwd), bytes(decoy)

    def flip() -> None:
        # Exchanges at random moments, a few per call: every step of a call (the
        # check, the mount plan, bwrap's bind, the chdir) meets both states.
        while not stop.is_set():
            libc.syscall(_RENAMEAT2, _AT_FDCWD, work, _AT_FDCWD, link, _RENAME_EXCHANGE)
            stop.wait(random.uniform(0, 0.004))

    thread = threading.Thread(target=flip, daemon=True)
    thread.start()
    try:
        yield stop
    finally:
        stop.set()
        thread.join()


def test_a_working_directory_swapped_for_a_symlink_to_home_never_exposes_home(
    stack: Stack, swapper: threading.Event
) -> None:
    stack.tool("writer", WRITER)
    outcomes = {"ran": 0, "refused": 0}
    for _ in range(80):
        try:
            result = stack.call("writer", timeout=30)
        except OllieError:
            outcomes["refused"] += 1  # the check saw the symlink, or pinning refused it
            continue
        if result.exit_code == 0:
            outcomes["ran"] += 1
        else:  # the exec step found a directory other than the pinned one
            assert result.exit_code == 125, result.stderr
            outcomes["refused"] += 1
        assert not (stack.home / "pwned").exists(), (outcomes, result.stdout)
    swapper.set()
    assert not (stack.home / "pwned").exists(), outcomes
    assert outcomes["ran"] > 0, outcomes  # the calls did run, in the real directory


def test_a_call_runs_in_the_directory_that_was_checked(stack: Stack) -> None:
    stack.tool("writer", WRITER)
    result = stack.call("writer", timeout=30)
    assert (result.exit_code, result.stdout) == (0, f"{stack.cwd}\n")
    assert (stack.cwd / "pwned").read_text() == "pwned\n"
