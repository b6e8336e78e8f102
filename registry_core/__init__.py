"""Pure-Python core of Ollie Tray: registry, dispatcher, sandbox, elevation broker (no Qt)."""
