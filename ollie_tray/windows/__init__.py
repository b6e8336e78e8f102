"""The tray's windows: remembered policies and the audit log."""

from ollie_tray.windows.audit import AuditWindow
from ollie_tray.windows.policies import PoliciesWindow

__all__ = ["AuditWindow", "PoliciesWindow"]
