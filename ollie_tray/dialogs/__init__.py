"""The tray's dialogs: approve an elevation request, enter the sudo password.

Both are shown with ``show()`` and answer through a signal, never through a
nested event loop; both can be withdrawn when the broker stops waiting.
"""

from ollie_tray.dialogs.approval import ApprovalDialog
from ollie_tray.dialogs.password import PasswordDialog

__all__ = ["ApprovalDialog", "PasswordDialog"]
