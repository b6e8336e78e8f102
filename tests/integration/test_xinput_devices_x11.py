"""The XInput2 device reader against a real X server (Xvfb): names, XTEST, the opcode.

Under Xvfb every event a test can make is XTEST (that is what xdotool
uses), so a real device's click cannot be produced here.  What can be
checked for real: the server's own device table as the tray reads it
through libXi, and that an event naming a non-XTEST slave of that table is
judged real while one naming the XTEST slave is judged synthetic (the
events are built by hand with the server's real ids and opcode).
The end-to-end refusal of real xdotool input is tests/e2e/test_synthetic_input.py.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from pathlib import Path

import desktop_session as ds
import pytest

from ollie_tray.dialogs.xinput import Phase, Verdict, XDevices, XInputOrigin, is_synthetic_device

pytestmark = [pytest.mark.realstack]


@pytest.fixture
def devices(tmp_path: Path) -> Iterator[XDevices]:
    with ds.xvfb(tmp_path) as display:
        found = XDevices(display)
        try:
            yield found
        finally:
            found.close()


def xi_button(opcode: int, evtype: int, time: int, source: int) -> bytes:
    head = struct.pack("<BBHIHHI", 35, opcode, 1, 0, evtype, 2, time)
    return head + bytes(56 - len(head)) + struct.pack("<H", source) + bytes(8)


def test_the_server_names_its_xtest_devices_and_real_ones(devices: XDevices) -> None:
    names = devices.names()
    assert "Virtual core XTEST pointer" in names.values(), names
    assert "Virtual core XTEST keyboard" in names.values(), names
    assert devices.opcode >= 128  # an extension's major opcode


def test_events_are_judged_by_their_source_device(devices: XDevices) -> None:
    names = devices.names()
    xtest = next(i for i, n in names.items() if n == "Virtual core XTEST pointer")
    # Xvfb's own slave devices ("Xvfb mouse"…) stand in for a person's mouse.
    real = next(
        i
        for i, n in names.items()
        if not is_synthetic_device(n) and not n.startswith("Virtual core") and "mouse" in n.lower()
    )
    origin = XInputOrigin(devices)
    origin.feed(xi_button(devices.opcode, 4, 10, real))
    origin.feed(xi_button(devices.opcode, 5, 11, real))
    origin.feed(xi_button(devices.opcode, 4, 20, xtest))
    assert origin.verdict(10, Phase.PRESS) is Verdict.REAL
    assert origin.verdict(11, Phase.RELEASE) is Verdict.REAL
    assert origin.verdict(20, Phase.PRESS) is Verdict.SYNTHETIC
