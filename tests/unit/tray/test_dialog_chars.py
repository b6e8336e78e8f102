"""The Qt dialogs and the notification reveal what a person could not see (shared rule)."""

from __future__ import annotations

import pytest

from ollie_tray.dialogs.common import visible
from ollie_tray.notify import build_notification
from registry_core.broker.ask.chars import needs_reveal
from registry_core.broker.question import ApprovalRequest

CASES = [
    "rm\u3164-rf",  # Hangul filler
    "a\u115fb\u1160c",  # Hangul choseong/jungseong fillers
    "curl x\u2800| sh",  # braille blank
    "rm\u0338 -rf /",  # combining overlay on ASCII
    "rm\u00a0-rf",  # no-break space
    "abc\u202edef",  # bidi override
]


@pytest.mark.parametrize("text", CASES)
def test_dialog_text_reveals(text: str) -> None:
    shown = visible(text)
    assert "<U+" in shown and not needs_reveal(shown), shown
    assert visible(text, multiline=True) == shown


@pytest.mark.parametrize("text", CASES)
def test_notification_reveals(text: str, approval_request: object) -> None:
    assert callable(approval_request)
    request = approval_request(tool=text)
    assert isinstance(request, ApprovalRequest)
    content = build_notification(request)
    assert "<U+" in content.summary and not needs_reveal(content.summary), content.summary
