"""What kdialog and zenity are given to show, character for character.

``test_dialog_prompters.py`` drives both front-ends through a fake dialog
program; this file pins the pure parts they share: the rich text of
kdialog (``<qt>`` HTML), the Pango markup of zenity's ``--question``, each
one's escaping, and where zenity switches from a question to a scrolling
text view.  Written for the mutants of ``kdialog.py`` and ``zenity.py``
.
"""

from __future__ import annotations

import pytest

from registry_core.broker.ask import kdialog, zenity
from registry_core.broker.ask.text import Field, PromptText, Style

HOSTILE = "a\"b'c\\d<e>&f_g"

TEXT = PromptText(
    title="T",
    headline="Run <x>?",
    warnings=("w & 1", "w2"),
    fields=(
        Field("Plain", ("one", "two\\n")),
        Field("Single", ("only",)),
        Field("Script", ("a < b", "  c"), Style.CODE),
        Field("Line", ("x",), Style.CODE),
        Field("Code", ("c1",), Style.CODE),
        Field("Empty", ()),
    ),
    footer="Foot & note",
)


def test_kdialog_escapes_markup_quotes_and_backslashes() -> None:
    assert kdialog.escape(HOSTILE) == "a&quot;b&#x27;c&#92;d&lt;e&gt;&amp;f_g"


def test_kdialog_rich_text_word_for_word() -> None:
    assert kdialog.render(TEXT, extra="Hint <b>") == (
        "<qt><h3>Run &lt;x&gt;?</h3>"
        '<p><b><font color="#b00000">w &amp; 1</font></b></p>'
        '<p><b><font color="#b00000">w2</font></b></p>'
        "<table cellspacing='2'>"
        "<tr><td valign='top'><b>Plain</b></td><td>one<br>two&#92;n</td></tr>"
        "<tr><td valign='top'><b>Single</b></td><td>only</td></tr>"
        "<tr><td valign='top'><b>Script</b></td><td><pre>a &lt; b\n  c</pre></td></tr>"
        "<tr><td valign='top'><b>Line</b></td><td><pre>x</pre></td></tr>"
        "<tr><td valign='top'><b>Code</b></td><td><pre>c1</pre></td></tr>"
        "<tr><td valign='top'><b>Empty</b></td><td></td></tr>"
        "</table>"
        "<p><i>Foot &amp; note</i></p>"
        "<p><small>Hint &lt;b&gt;</small></p>"
        "</qt>"
    )


def test_kdialog_rich_text_without_footer_or_extra() -> None:
    bare = PromptText(title="T", headline="H", warnings=(), fields=(Field("A", ("b",)),))
    assert kdialog.render(bare) == (
        "<qt><h3>H</h3><table cellspacing='2'>"
        "<tr><td valign='top'><b>A</b></td><td>b</td></tr></table></qt>"
    )


def test_zenity_markup_keeps_quotes_and_doubles_backslashes() -> None:
    assert zenity.markup(HOSTILE) == "a\"b'c\\\\d&lt;e&gt;&amp;f_g"


def test_zenity_plain_labels_double_backslashes_and_underscores() -> None:
    assert zenity.mnemonic_plain(HOSTILE) == "a\"b'c\\\\d<e>&f__g"


def test_zenity_question_markup_word_for_word() -> None:
    assert zenity.render(TEXT).split("\n") == [
        "<big><b>Run &lt;x&gt;?</b></big>",
        '<span foreground="#b00000" weight="bold">w &amp; 1</span>',
        '<span foreground="#b00000" weight="bold">w2</span>',
        "",
        "<b>Plain:</b>",
        "one",
        "two\\\\n",
        "<b>Single:</b> only",
        "<b>Script:</b>",
        "<tt>a &lt; b</tt>",
        "<tt>  c</tt>",
        "<b>Line:</b> <tt>x</tt>",
        "<b>Code:</b>",
        "<tt>c1</tt>",
        "<b>Empty:</b>",
        "",
        "<i>Foot &amp; note</i>",
    ]
    bare = PromptText(title="T", headline="H", warnings=(), fields=())
    assert zenity.render(bare) == "<big><b>H</b></big>\n"


def lines_text(count: int, width: int) -> PromptText:
    """A text whose plain lines are ``count`` lines, the first ``width`` characters long."""
    body = tuple("x" for _ in range(count - 2))
    return PromptText(title="T", headline="h" * width, warnings=(), fields=(Field("F", body),))


@pytest.mark.parametrize(
    ("count", "width", "fits"),
    [(30, 110, True), (31, 10, False), (30, 111, False), (3, 111, False), (31, 111, False)],
)
def test_zenity_question_limits(count: int, width: int, fits: bool) -> None:
    text = lines_text(count, width)
    assert len(text.plain_lines()) == count
    assert zenity.fits_question(text) is fits
