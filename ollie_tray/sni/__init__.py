"""Our own StatusNotifierItem and dbusmenu export (dbus-fast), instead of Qt's.

- :mod:`~ollie_tray.sni.menu_model`: the menu as data, stable ids, diffs (pure).
- :mod:`~ollie_tray.sni.dbusmenu`: ``com.canonical.dbusmenu`` serving that model.
- :mod:`~ollie_tray.sni.item`: ``org.kde.StatusNotifierItem`` (status, icon names, title).
- :mod:`~ollie_tray.sni.export`: the bus connection, the name, the watcher's comings and goings.
- :mod:`~ollie_tray.sni.qt_tray`: keeps the export in step with the tray's ``QMenu`` and state.
"""
