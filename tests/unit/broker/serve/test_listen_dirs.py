"""The broker's socket directory: created private, parents included."""

from __future__ import annotations

import shutil
import stat
import tempfile
from pathlib import Path

from registry_core import paths
from registry_core.broker.serve.listen import bind_socket


def test_a_socket_in_the_cache_fallback_gets_private_parents() -> None:
    # A short base: pytest's tmp_path would exceed the 108 bytes of a socket address.
    tmp_path = Path(tempfile.mkdtemp(prefix="i12b-"))
    env = {"HOME": str(tmp_path / "h")}
    socket_path = paths.elevate_socket(env)
    sock = bind_socket(socket_path)
    try:
        assert stat.S_IMODE(socket_path.stat().st_mode) == 0o600
        created = socket_path.parent
        while created != tmp_path:  # every directory bind_socket had to create
            assert stat.S_IMODE(created.stat().st_mode) == 0o700, created
            created = created.parent
    finally:
        sock.close()
        shutil.rmtree(tmp_path)
