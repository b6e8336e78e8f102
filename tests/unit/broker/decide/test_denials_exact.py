"""The unattended-denial log, batcher and notification text pinned exactly.

Written against the mutants of ``denials.py``.
"""

from __future__ import annotations

from registry_core.broker.decide.denials import (
    KEEP,
    MIN_INTERVAL,
    Denial,
    DenialBatcher,
    DenialLog,
    DeniedBy,
    summary_text,
)


def denial(tool: str, why: DeniedBy = DeniedBy.POLICY, reason: str = "") -> Denial:
    return Denial(1.0, tool, "laptop", why, reason)


def test_a_line_adds_the_reason_only_when_it_says_more() -> None:
    assert denial("t", DeniedBy.POLICY, "").line() == "t — remembered deny"
    assert denial("t", DeniedBy.PAUSED, "paused").line() == "t — paused"
    assert denial("t", DeniedBy.TIMEOUT, "no answer within 30 s").line() == (
        "t — no answer in time: no answer within 30 s"
    )
    assert denial("t", DeniedBy.UNKNOWN_TOOL, "unknown tool").line() == "t — unknown tool"


def test_the_log_keeps_twenty_by_default_and_recent_gives_five() -> None:
    log = DenialLog()
    for n in range(KEEP + 3):
        log.add(denial(f"t{n}"))
    assert KEEP == 20
    assert [d.tool for d in log.recent()] == ["t22", "t21", "t20", "t19", "t18"]
    assert [d.tool for d in log.recent(100)][-1] == "t3"
    assert len(log.recent(100)) == 20


def test_a_listener_added_while_one_is_told_hears_the_next_denial_only() -> None:
    log = DenialLog()
    heard: list[str] = []

    def first(d: Denial) -> None:
        heard.append("first " + d.tool)
        log.subscribe(lambda later: heard.append("late " + later.tool))

    log.subscribe(first)
    log.add(denial("a"))
    assert heard == ["first a"]
    log.add(denial("b"))
    assert heard == ["first a", "first b", "late b"]


def test_the_batcher_waits_out_exactly_thirty_seconds_by_default() -> None:
    batcher = DenialBatcher()
    assert batcher.interval == MIN_INTERVAL == 30.0
    assert batcher.add(denial("a"), now=1000.0) == 0.0
    assert batcher.flush(1000.0) == [denial("a")]
    assert batcher.add(denial("b"), now=1029.5) == 0.5
    assert batcher.flush(1030.0) == [denial("b")]
    assert batcher.add(denial("c"), now=1060.0) == 0.0  # exactly one interval later


def test_an_empty_flush_keeps_the_time_of_the_last_notification() -> None:
    batcher = DenialBatcher(interval=10.0)
    batcher.add(denial("a"), now=100.0)
    batcher.flush(100.0)
    assert batcher.flush(105.0) == []  # a timer that found nothing: no notification
    assert batcher.add(denial("b"), now=106.0) == 4.0
    assert batcher.add(denial("c"), now=107.0) is None
    assert batcher.flush(110.0) == [denial("b"), denial("c")]
    assert batcher.add(denial("d"), now=111.0) == 9.0


def test_summary_of_up_to_four_lists_them_all() -> None:
    batch = [denial(t, DeniedBy.PAUSED, "paused") for t in "abcd"]
    assert summary_text(batch) == (
        "Ollie denied 4 requests",
        "a — paused\nb — paused\nc — paused\nd — paused",
    )
    assert summary_text(batch[:2]) == ("Ollie denied 2 requests", "a — paused\nb — paused")


def test_summary_of_more_shows_the_newest_and_counts_the_rest() -> None:
    batch = [denial(t) for t in "abcde"]
    assert summary_text(batch) == (
        "Ollie denied 5 requests",
        "… and 1 earlier\nb — remembered deny\nc — remembered deny\n"
        "d — remembered deny\ne — remembered deny",
    )
    assert summary_text(batch, shown=2) == (
        "Ollie denied 5 requests",
        "… and 3 earlier\nd — remembered deny\ne — remembered deny",
    )
    assert summary_text([denial("only", reason="why not")]) == (
        "Ollie denied only",
        "only — remembered deny: why not",
    )
