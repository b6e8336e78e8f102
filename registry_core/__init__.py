"""Pure-Python core of Ollie Tray: tool registry, dispatcher, sandbox and elevation broker (no Qt)."""
