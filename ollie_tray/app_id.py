"""The application id: one reverse-DNS name for every place a desktop looks Ollie Tray up.

The launcher and autostart entries are ``<APP_ID>.desktop``, Qt's desktop file
name, the application icon, the AppStream component id, the notifications'
``desktop-entry`` hint and the StatusNotifierItem id all read it from here;
the launcher's D-Bus commands live under it too.  ``LEGACY_ID`` is the name
used before, looked for once at start to move old entries over.
"""

from __future__ import annotations

APP_ID = "io.github.ollie_tray.OllieTray"
LEGACY_ID = "ollie-tray"
DESKTOP_FILE = f"{APP_ID}.desktop"
LEGACY_DESKTOP_FILE = f"{LEGACY_ID}.desktop"
METAINFO_FILE = f"{APP_ID}.metainfo.xml"
