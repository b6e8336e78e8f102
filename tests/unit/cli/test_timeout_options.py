"""Every ``--timeout`` is a positive, finite number of seconds, or a usage error.

``float`` reads ``nan`` and ``inf``: a NaN compares false with everything, so
``timeout <= 0`` let it through, and the dispatcher's rounding then crashed with
a traceback (``ollie-tools call --timeout nan``, ``--timeout inf``).  Each
command now refuses such a value in words, with exit 2, before anything runs.
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from registry_core.cli import approve, broker, tools

BAD = ["nan", "inf", "-inf", "0", "-1"]


@pytest.mark.parametrize("value", BAD)
def test_call_refuses_a_timeout_that_is_not_a_positive_finite_number(
    value: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("OLLIE_TOOLS_PATH", str(tmp_path))
    out = io.StringIO()
    forms = [["call", "greet", f"--timeout={value}"]]
    if value != "-inf":  # argparse reads a lone "-inf" as an option, not a value
        forms.append(["call", "greet", "--timeout", value])
    for words in forms:
        assert tools.main(words, out) == 2
        shown = f"{float(value):g}"
        assert capsys.readouterr().err == (
            f"ollie-tools call: --timeout must be positive and finite (got {shown})\n"
        )
    assert out.getvalue() == ""


@pytest.mark.parametrize("option", ["--timeout", "--progress-interval"])
@pytest.mark.parametrize("value", BAD)
def test_mcp_refuses_a_timeout_that_is_not_a_positive_finite_number(
    option: str,
    value: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("OLLIE_TOOLS_PATH", str(tmp_path))
    assert tools.main(["mcp", f"{option}={value}"], io.StringIO()) == 2
    timeout, interval = (value, "1") if option == "--timeout" else ("60", value)
    assert capsys.readouterr().err == (
        "ollie-tools mcp: --timeout and --progress-interval must be positive and finite "
        f"(got {float(timeout):g} and {float(interval):g})\n"
    )


@pytest.mark.parametrize("value", BAD)
def test_the_broker_refuses_a_prompt_timeout_that_is_not_a_positive_finite_number(
    value: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sock = tmp_path / "b.sock"
    with pytest.raises(SystemExit) as stopped:
        broker.main(["--front-end", "none", "--socket", str(sock), f"--timeout={value}"])
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert err.endswith(
        f"ollie-broker: error: --timeout must be positive and finite (got {float(value):g})\n"
    )
    assert not sock.exists()


def test_ollie_approve_refuses_a_nan_timeout(capsys: pytest.CaptureFixture[str]) -> None:
    out = io.StringIO()
    with pytest.raises(SystemExit) as stopped:
        approve.run(["--json", "--timeout", "nan"], io.StringIO("{}"), out, {})
    assert stopped.value.code == 2
    assert capsys.readouterr().err.endswith(
        "ollie-approve: error: --timeout must be a number of seconds (got nan)\n"
    )
    assert out.getvalue() == ""
