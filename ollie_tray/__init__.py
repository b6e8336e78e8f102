"""The Qt system-tray application of Ollie Tray."""
