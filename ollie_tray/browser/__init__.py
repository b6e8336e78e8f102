"""The Tool Browser: every tool, every variant, every match condition, live.

:class:`BrowserWindow` is the entry point (the tray opens it); the other
modules are its parts: ``model`` (list model + filter), ``details`` (right
panel), ``run_form`` ("Run…"), ``whatif`` ("What if…" simulation) and
``live`` (inotify-driven refresh).
"""

from ollie_tray.browser.window import BrowserWindow

__all__ = ["BrowserWindow"]
