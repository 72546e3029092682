"""A reply speaks only for itself: its own label is stripped, another's turn ends it."""

import pytest

from apps.chat.council.turn_guard import TurnGuard

OWN = ["director", "Director"]
OTHERS = ["sound_designer", "Sound Designer", "User"]


def run(chunks, *, split=False):
    guard = TurnGuard(own=OWN, others=OTHERS)
    shown, ended = "", False
    for chunk in chunks:
        for piece in list(chunk) if split else [chunk]:
            result = guard.feed(piece)
            shown += result.text
            ended = ended or result.ended
    if not ended:
        shown += guard.finish().text
    # Text shown before the cut may end in blank lines; the stored reply is stripped.
    return (shown.rstrip() if ended else shown), ended


@pytest.mark.parametrize("split", [False, True])
@pytest.mark.parametrize(
    ("chunks", "shown", "ended"),
    [
        (["Plain answer."], "Plain answer.", False),
        (["[Director]: We go wide."], "We go wide.", False),
        (["**Director:** We go wide."], "We go wide.", False),
        (["@director: We go", " wide."], "We go wide.", False),
        (["We go wide.\n\n[Sound Designer]: And rain!"], "We go wide.", True),
        (["We go wide.\n[User]: thanks"], "We go wide.", True),
        (["We go wide.\n**Sound Designer:** rain"], "We go wide.", True),
        (["[a link](https://x.example) stays\n"], "[a link](https://x.example) stays\n", False),
        (["**Bold heading**\ntext"], "**Bold heading**\ntext", False),
        (["Note: keep this.\n[Note]: also this"], "Note: keep this.\n[Note]: also this", False),
        (["@sound_designer what do you hear?"], "@sound_designer what do you hear?", False),
    ],
)
def test_turn_guard(chunks, shown, ended, split):
    assert run(chunks, split=split) == (shown, ended)
