"""What a taken-over reply's continuation repeats of the text already shown is dropped before
it reaches the tabs — a restart from the beginning, from the last sentence, or from mid-word —
and a continuation that merely begins like the kept text is left alone."""

from __future__ import annotations

import pytest

from apps.chat.live.overlap import RepeatTrimmer

KEPT = "The harbour was quiet at dawn. Gulls circled the cranes. The ferry "


def run(kept: str, chunks: list[str]) -> tuple[str, int]:
    trimmer = RepeatTrimmer(kept)
    out = "".join(trimmer.feed(chunk) for chunk in chunks) + trimmer.finish()
    return out, trimmer.trimmed


def chunked(text: str, size: int = 3) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


@pytest.mark.parametrize(
    ("continuation", "shown"),
    [
        # Starts again from the beginning and goes on.
        (KEPT + "left at six.", "left at six."),
        # Repeats the last sentence first.
        ("Gulls circled the cranes. The ferry left at six.", "left at six."),
        # A plain continuation, as asked.
        ("left at six.", "left at six."),
        # Begins like the kept text but is not a repeat: kept whole.
        ("The harbour master waved.", "The harbour master waved."),
        # A short coincidence is not a repeat.
        ("The ferry", "The ferry"),
    ],
)
def test_the_repeat_is_dropped_and_the_rest_kept(continuation, shown):
    for size in (1, 3, 50):
        assert run(KEPT, chunked(continuation, size))[0] == shown


def test_a_cut_mid_word_restart_joins_the_word_and_records_the_trim():
    kept = "w1 w2 w3 w4 w5 w6 w7 w8 w9 w1"
    out, trimmed = run(kept, chunked("w1 w2 w3 w4 w5 w6 w7 w8 w9 w10 w11", 2))
    assert kept + out == "w1 w2 w3 w4 w5 w6 w7 w8 w9 w10 w11"
    assert trimmed == len(kept)


def test_a_continuation_that_ends_while_still_alike_is_let_through():
    assert run(KEPT, ["The harbour was"]) == ("The harbour was", 0)


def test_nothing_kept_means_nothing_held():
    trimmer = RepeatTrimmer("")
    assert trimmer.feed("Hello") == "Hello" and trimmer.finish() == ""
