"""How long Anthropic keeps a request's cache entries: 5 minutes, or an hour where it pays.

A 1-hour entry costs 2x the input price to write instead of 1.25x; in return, a person who
pauses longer than 5 minutes comes back to a cached prefix (read at 0.1x) instead of paying to
write the whole history again. Whether that pays depends on how likely such a pause is, which
the thread's own gaps (from the end of one turn to the next message) tell, and on how much is
at stake: the prefix that would be lost against what this request newly writes.

Only the request that ends a turn (the convergence role's, or each reply of a turn without
one) writes what the next turn reads, so only it may take the hour for its history. The shared
system block is written rarely and read by every later request, so it takes the hour as soon
as pauses are likely at all over the thread's life.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

from apps.chat.council.prompting import estimate_tokens
from apps.chat.models import USER_SPEAKER, Message, Stage, Turn
from apps.providers.types import CacheTTL, ChatRequest

READ, WRITE_5M, WRITE_1H = 0.1, 1.25, 2.0  # Anthropic's multipliers of the input price
LONG_GAP_SECONDS = 270  # a gap this long risks a 5-minute entry written before the reply
# Before a thread has gaps of its own: people often read for a couple of minutes, and the
# spread of human pauses is wide. The prior counts as this many observed gaps.
PRIOR_MEDIAN_SECONDS, PRIOR_SPREAD, PRIOR_WEIGHT = 120.0, 1.2, 2.0
GAPS_LOOKED_AT = 40


@dataclass(frozen=True)
class TtlChoice:
    system: CacheTTL
    history: CacheTTL
    pause_chance: float
    expected_saving: float  # in input tokens' worth; > 0 where the hour was chosen

    def note(self) -> str:
        """What the reply's Details say about it."""
        chance = f"a pause over 5 min: {self.pause_chance:.0%} likely"
        if self.history == "1h":
            saving = f"saves ~{self.expected_saving:,.0f} input tokens' worth on average"
            return f"cache kept 1 h ({chance}; {saving})"
        if self.system == "1h":
            return f"cache kept 1 h for the shared setup, 5 min for the history ({chance})"
        return f"cache kept 5 min ({chance})"


FIVE_MINUTES = TtlChoice("5m", "5m", 0.0, 0.0)


def pause_chance(gaps: Sequence[float]) -> float:
    """How likely the next gap is longer than a 5-minute entry lasts.

    Human pauses are roughly log-normal: the thread's gaps (blended with the prior) give their
    typical length and spread, so two-minute readers are told apart from rapid-fire chats
    before either has paused for long.
    """
    logs = [math.log(max(gap, 1.0)) for gap in gaps]
    weight = PRIOR_WEIGHT + len(logs)
    centre = (PRIOR_WEIGHT * math.log(PRIOR_MEDIAN_SECONDS) + sum(logs)) / weight
    spread = math.sqrt(
        (PRIOR_WEIGHT * PRIOR_SPREAD**2 + sum((value - centre) ** 2 for value in logs)) / weight
    )
    z = (math.log(LONG_GAP_SECONDS) - centre) / spread
    return 0.5 * math.erfc(z / math.sqrt(2))


def choose(
    *, gaps: Sequence[float], prefix_tokens: int, new_tokens: int, turns: int, closing: bool
) -> TtlChoice:
    """The TTLs for one request: `prefix_tokens` is what it sends before its cue, `new_tokens`
    what of that no earlier request of the thread wrote, `turns` how many turns came before."""
    chance = pause_chance(gaps)
    # The system block: each future pause would make it be written again. A thread tends to
    # go on about as long as it has gone, and at least a few turns.
    future_pauses = chance * max(3, turns)
    system: CacheTTL = "1h" if future_pauses * (WRITE_5M - READ) > WRITE_1H - WRITE_5M else "5m"
    if not closing:
        return TtlChoice(system, "5m", chance, 0.0)
    saving = chance * (WRITE_5M - READ) * prefix_tokens - (WRITE_1H - WRITE_5M) * new_tokens
    if saving <= 0:
        return TtlChoice(system, "5m", chance, 0.0)
    return TtlChoice("1h", "1h", chance, saving)  # a 1h breakpoint may not follow a 5m one


def for_request(
    request: ChatRequest, *, new_texts: Sequence[str], gaps: Sequence[float], closing: bool
) -> ChatRequest:
    """The request with the TTLs `choose` gives it, noted in its metadata for the Details.
    `new_texts` are the transcript blocks no earlier closing request sent."""
    texts = [block.text for block in request.system]
    texts += [part.get("text", "") for item in request.messages[:-1] for part in item.parts]
    choice = choose(
        gaps=gaps,
        prefix_tokens=sum(estimate_tokens(text) for text in texts),
        new_tokens=sum(estimate_tokens(text) for text in new_texts),
        turns=len(gaps),
        closing=closing,
    )
    return replace(
        request,
        system_cache_ttl=choice.system,
        history_cache_ttl=choice.history,
        metadata={**request.metadata, "cache_ttl": choice.note()},
    )


def thread_gaps(*, thread_id: int, before_seq: int) -> list[float]:
    """Seconds from the end of each earlier turn to the person's next message (one query)."""
    rows = list(
        Message.objects.filter(thread_id=thread_id, seq__lt=before_seq)
        .order_by("-seq")
        .values_list("speaker", "created_at", "finished_at")[: GAPS_LOOKED_AT * 6]
    )
    gaps, settled = [], None
    for speaker, created_at, finished_at in reversed(rows):
        if speaker == USER_SPEAKER:
            if settled is not None:
                gaps.append(max(0.0, (created_at - settled).total_seconds()))
            settled = None
        elif finished_at is not None:
            settled = max(settled, finished_at) if settled else finished_at
    return gaps[-GAPS_LOOKED_AT:]


def closes_turn(*, message: Message, turn: Turn | None) -> bool:
    """Whether the next turn will read what this reply's request writes: the convergence
    role's reply, or any reply of a turn that has none."""
    if turn is None or message.stage == Stage.AUTO_ROUND:
        return False
    if message.stage == Stage.LAST:
        return True
    return not Message.objects.filter(turn=turn, stage=Stage.LAST).exists()
