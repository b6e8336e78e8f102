"""The tray's broker refreshes its registry like ``ollie-broker``.

Both ask ``registry_core.registry.live.LiveRegistry`` per request: a tool
written just before a request is the registry's answer, whether or not the
event loop has run the inotify callback yet.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from PySide6.QtWidgets import QApplication
from test_app import run_app, tray_env  # noqa: F401  (a fixture)

from ollie_tray.app import TrayApp
from registry_core.registry.live import LiveRegistry


def test_the_trays_broker_sees_an_edit_made_just_before_the_request(
    qapp: QApplication,
    tray_env: dict[str, str],  # noqa: F811
) -> None:
    tools = Path(tray_env["OLLIE_TOOLS_PATH"])

    async def scenario(app: TrayApp) -> Any:
        (tools / "brand_new.meta").write_text(json.dumps({"description": "Just written."}))
        # No await between the write and the lookup: the loop has not seen the event.
        seen = app.broker.registry().tools.get("brand_new")
        return None if seen is None else seen.description, app

    code, (description, app) = run_app(qapp, tray_env, scenario)
    assert code == 0
    assert description == "Just written."
    assert isinstance(app.live, LiveRegistry)  # the code ollie-broker runs
    assert app.broker.registry == app.live.current
