"""``ollie-broker`` leaves its start-up heap out of the garbage collector's walks (issue 19).

Each case runs in a child interpreter: freezing is process-wide, and this
test process must not freeze its own heap.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

RUN_BROKER = textwrap.dedent(
    """
    import gc, os, signal, sys, threading, time
    from pathlib import Path
    from registry_core.cli import broker

    sock = Path(sys.argv[1])

    def stop_when_listening():
        deadline = time.monotonic() + 30
        while not sock.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=stop_when_listening, daemon=True).start()
    code = broker.main(["--front-end", "none", "--socket", str(sock)])
    print(code, gc.get_freeze_count(), gc.get_threshold()[0])
    """
)

FROZEN_TOOLS = textwrap.dedent(
    """
    import gc, json, sys
    from registry_core.elevation.heap import freeze_startup_heap
    from registry_core.registry import RegistryLoader
    from registry_core.registry.live import LiveRegistry

    live = LiveRegistry(RegistryLoader([sys.argv[1]], {"PATH": "/usr/bin"}))
    tool = live.current().tools["t0"]
    frozen = freeze_startup_heap()
    tracked = {id(o) for o in gc.get_objects()}
    open(sys.argv[1] + "/t0.meta", "w").write(json.dumps({"description": "edited"}))
    edited = live.current().tools["t0"].description
    # Only this variable (and getrefcount's argument) still holds the replaced tool:
    # dropping it frees it by reference counting, frozen or not.
    refs = sys.getrefcount(tool)
    print(json.dumps({
        "frozen": frozen,
        "registry_tracked": id(live.loader.current) in tracked,
        "edited": edited,
        "old_tool_refs": refs,
    }))
    """
)


def child_env(tmp_path: Path) -> dict[str, str]:
    return {
        **os.environ,
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
        "XDG_RUNTIME_DIR": str(tmp_path / "run"),
        "OLLIE_TOOLS_PATH": str(tmp_path / "tools"),
    }


def test_ollie_broker_freezes_its_heap_once_started(tmp_path: Path) -> None:
    (tmp_path / "tools").mkdir()
    sock = tmp_path / "run" / "ollie" / "elevate.sock"
    done = subprocess.run(
        [sys.executable, "-c", RUN_BROKER, str(sock)],
        env=child_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    code, frozen, young = done.stdout.split()
    assert code == "0"
    assert int(frozen) > 1000  # the modules and the registry, at least
    assert int(young) >= 20_000  # young collections spaced out


def test_a_frozen_registry_is_skipped_by_the_collector_yet_still_refreshed(
    tmp_path: Path,
) -> None:
    tools = tmp_path / "tools"
    tools.mkdir()
    for n in range(50):
        (tools / f"t{n}.meta").write_text(json.dumps({"description": f"tool {n}"}))
    done = subprocess.run(
        [sys.executable, "-c", FROZEN_TOOLS, str(tools)],
        env=child_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["frozen"] > 0
    assert report["registry_tracked"] is False  # no collection walks it any more
    assert report["edited"] == "edited"
    assert report["old_tool_refs"] == 2  # reference counting frees it when dropped
