"""The headless front-ends' shared wording, line for line.

``test_prompt_text.py`` checks that each part appears; this file pins the
whole text of an approval (every warning and field at once, and the code
form), of a password question, the escapes at each size boundary, the
argument listing's limits and orderings, and the default limits.
"""

from __future__ import annotations

import dataclasses

import pytest
from test_prompt_text import make_request

from registry_core.broker.ask.text import (
    Field,
    Limits,
    PromptText,
    Style,
    approval_text,
    args_lines,
    clean,
    clip,
    code_lines,
    password_text,
    remember_title,
    shell_join,
    shell_quote,
)
from registry_core.broker.peer.identity import ProcessInfo
from registry_core.broker.question import PasswordRequest
from registry_core.broker.wire.messages import Kind


def test_every_warning_and_field_at_once_word_for_word() -> None:
    requester = dataclasses.replace(make_request().requester, sandboxed=True)
    request = make_request(
        client="codex",
        claimed_host="laptop",
        remote=True,
        host="box",
        requester=requester,
        mismatches=("a", "b"),
    )
    text = approval_text(request)
    assert text.title == "Ollie: approve system_logs as root?"
    assert remember_title(request) == "Ollie: how long to approve system_logs?"
    assert text.plain_lines() == [
        "The tool system_logs asks to run as root via sudo.",
        "!! SANDBOXED: this request comes from inside the sandbox; "
        "the asking process never receives a password.",
        "!! REMOTE: this request comes from another computer (box).",
        "!! WARNING: this request does not match the tool registry here:",
        "!!   - a",
        "!!   - b",
        "",
        "Tool:          system_logs — Read system logs (dmesg).",
        "Variant:       1",
        "Executable:    /usr/local/bin/system_logs",
        "               sha256 0123456789ab…",
        "Command:       sudo -A -- /usr/local/bin/system_logs",
        "Arguments:     {",
        '                 "lines": "10",',
        '                 "source": "dmesg"',
        "               }",
        "Directory:     /home/alice/project",
        "Requested by:  pid 4242 (uid 1000) (from inside the sandbox): /usr/bin/python3.11",
        "Command line:  python3 agent.py --model 'big one'",
        "Parent chain:  4000 bash -l",
        "               3000 tmux",
        "Via client:    codex  (as the requester says)",
        "Host:          box  (REMOTE)  (it calls itself laptop)",
        "Asks to:       run as root via sudo",
        "Approval covers: exactly these bytes (the sha256), run in the directory above",
        "               with a clean environment (system PATH, no LD_*/PYTHON* variables);",
        "               code the tool loads from a directory others can write is trusted too",
        "",
        "Unanswered, this request is denied after 120 s.",
    ]


def test_the_code_form_word_for_word() -> None:
    code = "echo hi\nrm -rf x\n"
    request = make_request(
        code=code, argv=("/bin/bash", "-c", code), sha256=None, description="", timeout=29.6
    )
    text = approval_text(request)
    assert text.plain_lines() == [
        "The tool system_logs asks to run as root via sudo.",
        "!! RISK: the code deletes files and directories recursively (rm -r)",
        "",
        "Code:",
        "  | echo hi",
        "  | rm -rf x",
        "Code lines:    2, all shown above",
        "Tool:          system_logs",
        "Variant:       1",
        "Executable:    /usr/local/bin/system_logs",
        "               sha256 unknown",
        "Command:       /bin/bash -c '[the code above]'",
        "Arguments:     {",
        '                 "lines": "10",',
        '                 "source": "dmesg"',
        "               }",
        "Directory:     /home/alice/project",
        "Requested by:  pid 4242 (uid 1000): /usr/bin/python3.11",
        "Command line:  python3 agent.py --model 'big one'",
        "Parent chain:  4000 bash -l",
        "               3000 tmux",
        "Host:          desk.example.org",
        "Asks to:       run as root via sudo",
        "Approval covers: exactly this code, run in the directory above",
        "               with a clean environment (system PATH, no LD_*/PYTHON* variables);",
        "               code the tool loads from a directory others can write is trusted too",
        "",
        "Unanswered, this request is denied after 30 s.",
    ]
    assert [f.style for f in text.fields[:2]] == [Style.CODE, Style.PLAIN]
    assert text.field("Command").style is Style.CODE
    assert text.field("Arguments").style is Style.CODE
    assert text.field("Tool").style is Style.PLAIN


def test_a_requester_without_names_and_a_parent_without_a_command_line() -> None:
    requester = dataclasses.replace(
        make_request().requester,
        exe="",
        cmdline=(),
        parents=(ProcessInfo(7, "/usr/bin/init", ()), ProcessInfo(1, "", ())),
    )
    text = approval_text(make_request(requester=requester))
    assert text.field("Requested by").lines == ("pid 4242 (uid 1000): ?",)
    assert text.field("Command line").lines == ("?",)
    assert text.field("Parent chain").lines == ("7 /usr/bin/init", "1 ?")
    orphan = dataclasses.replace(requester, parents=())
    assert approval_text(make_request(requester=orphan)).field("Parent chain").lines == ("(none)",)


def test_the_password_question_word_for_word() -> None:
    request = PasswordRequest(
        id="p", approval=make_request(remote=True), prompt="  ", user="bob", attempt=3
    )
    text = password_text(request)
    assert text.title == "Ollie: sudo password for system_logs"
    assert text.plain_lines() == [
        "sudo needs the password of bob to run system_logs as root.",
        "!! Wrong password, try again (3/3)",
        "",
        "Tool:          system_logs — run as root via sudo",
        "Command:       sudo -A -- /usr/local/bin/system_logs",
        "User:          bob",
        "Host:          desk.example.org  (REMOTE)",
        "sudo asks:     Password:",
        "",
        "Attempt 3 of 3.",
    ]
    assert text.field("Command").style is Style.CODE
    first = dataclasses.replace(request, attempt=1, prompt=" [sudo] pw\x1b: ")
    assert password_text(first).warnings == ()
    assert password_text(first).field("sudo asks").lines == ("[sudo] pw\\x1b:",)


def test_plain_lines_of_unusual_fields() -> None:
    text = PromptText(
        title="t",
        headline="h",
        warnings=(),
        fields=(
            Field("Empty", ()),
            Field("Trailing", ("x   ",)),
            Field("Script", ("a", "b"), Style.CODE),
            Field("Code", ("c",), Style.PLAIN),
        ),
    )
    assert text.plain_lines() == [
        "h",
        "",
        "Empty:",
        "Trailing:      x",
        "Script:        a",
        "               b",
        "Code:          c",
    ]
    assert text.field("Script").lines == ("a", "b")
    with pytest.raises(KeyError) as raised:
        text.field("Missing")
    assert raised.value.args == ("Missing",)


@pytest.mark.parametrize(
    ("char", "shown"),
    [
        ("\x00", "\\x00"),
        ("\x9f", "\\x9f"),
        ("\u00a0", "\\xa0"),
        ("\u00ad", "\\xad"),
        ("\u0378", "\\u0378"),
        ("\uffff", "\\uffff"),
        ("\U000e0041", "\\U000e0041"),
    ],
)
def test_each_escape_has_the_width_its_code_point_needs(char: str, shown: str) -> None:
    assert clean(f"<{char}>") == f"<{shown}>"


def test_tabs_become_four_column_stops() -> None:
    assert clean("\tx") == "    x"
    assert clean("ab\tc") == "ab  c"


def test_clip_at_its_limit() -> None:
    assert clip("abcd", 4) == "abcd"
    assert clip("abcde", 4) == "abcd… (1 more characters)"


def test_shell_quote_chooses_the_plainest_exact_form() -> None:
    assert shell_quote("/usr/bin/a-b_c@d%e+f=g:h,i.j") == "/usr/bin/a-b_c@d%e+f=g:h,i.j"
    assert shell_quote("") == "''"
    assert shell_quote("a b") == "'a b'"
    assert shell_quote("a\tb'c\\d") == "$'a\\x09b\\'c\\\\d'"
    assert shell_quote("it's\u00a0") == "$'it\\'s\\xa0'"
    assert shell_quote("caf\u00e9") == "'caf\u00e9'"
    assert shell_join(["a", "b c"]) == "a 'b c'"


def test_code_lines_split_on_newlines_only() -> None:
    assert code_lines("a\r\nb\x0bc\n") == ("a\\x0d", "b\\x0bc", "")


def test_arguments_keep_unicode_sort_their_keys_and_show_other_values_by_repr() -> None:
    lines = args_lines({"z": "\u00fc", "a": (1, 2), "m": {1, 2}.__class__}, Limits())
    assert lines == (
        "{",
        '  "a": [',
        "    1,",
        "    2",
        "  ],",
        '  "m": "<class \'set\'>",',
        '  "z": "\u00fc"',
        "}",
    )


def test_arguments_whose_keys_cannot_be_sorted_keep_the_callers_order() -> None:
    assert args_lines({"b": 1, 2: "x"}, Limits()) == ("{", '  "b": 1,', '  "2": "x"', "}")


def test_arguments_at_the_line_limit_are_all_shown() -> None:
    args = {f"k{i}": i for i in range(3)}  # 5 lines with the braces
    assert len(args_lines(args, Limits(args_lines=5))) == 5
    assert args_lines(args, Limits(args_lines=4))[-1] == "… (1 more lines)"
    assert args_lines(args, Limits(args_lines=4))[:4] == (
        "{",
        '  "k0": 0,',
        '  "k1": 1,',
        '  "k2": 2',
    )


def test_the_default_limits() -> None:
    assert Limits() == Limits(
        args_lines=40, line_chars=200, cmdline_chars=400, description_chars=600
    )
    request = make_request(
        description="d" * 601,
        args={f"k{i:02}": "v" * 300 for i in range(50)},
        requester=dataclasses.replace(make_request().requester, cmdline=("c" * 401,)),
    )
    text = approval_text(request)
    assert text.field("Tool").lines == (f"system_logs — {'d' * 600}… (1 more characters)",)
    assert text.field("Command line").lines == (f"{'c' * 400}… (1 more characters)",)
    arguments = text.field("Arguments").lines
    assert len(arguments) == 41
    assert arguments[-1] == "… (12 more lines)"
    assert arguments[1] == f'  "k00": "{"v" * 190}… (112 more characters)'


def test_a_sandbox_escape_without_an_executable_word_for_word() -> None:
    request = make_request(
        kind=Kind.SANDBOX,
        variant=None,
        executable=None,
        sha256=None,
        args={},
        description="",
        timeout=60.4,
    )
    text = approval_text(request)
    assert text.title == "Ollie: approve system_logs outside the sandbox?"
    assert text.plain_lines() == [
        "The tool system_logs asks to run outside the sandbox as you.",
        "!! WARNING: the registry could not resolve this tool's executable.",
        "",
        "Tool:          system_logs",
        "Variant:       default",
        "Executable:    (not resolved)",
        "Command:       sudo -A -- /usr/local/bin/system_logs",
        "Arguments:     (none)",
        "Directory:     /home/alice/project",
        "Requested by:  pid 4242 (uid 1000): /usr/bin/python3.11",
        "Command line:  python3 agent.py --model 'big one'",
        "Parent chain:  4000 bash -l",
        "               3000 tmux",
        "Host:          desk.example.org",
        "Asks to:       run outside the sandbox as you",
        "Approval covers: exactly these bytes (the sha256), run in the directory above",
        "               with a clean environment (system PATH, no LD_*/PYTHON* variables);",
        "               code the tool loads from a directory others can write is trusted too",
        "",
        "Unanswered, this request is denied after 60 s.",
    ]


def test_unsortable_keys_keep_unicode_and_show_other_values_by_repr() -> None:
    lines = args_lines({"b": "\u00fc", 2: {1, 2}.__class__}, Limits())
    assert lines == ("{", '  "b": "\u00fc",', '  "2": "<class \'set\'>"', "}")


def test_the_codes_risks_follow_the_requests_own_warnings() -> None:
    code = "rm -rf x"
    request = make_request(code=code, argv=("/bin/bash", "-c", code), remote=True, host="box")
    assert approval_text(request).warnings == (
        "REMOTE: this request comes from another computer (box).",
        "RISK: the code deletes files and directories recursively (rm -r)",
    )


def test_a_local_password_question_names_the_host_plainly() -> None:
    request = PasswordRequest(id="p", approval=make_request(), prompt="x", user="bob", attempt=1)
    assert password_text(request).field("Host").lines == ("desk.example.org",)
