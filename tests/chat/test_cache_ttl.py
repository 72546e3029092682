"""The cheapest cache (issue 24, item 8): a 1-hour TTL where the thread's pauses make it pay,
5 minutes elsewhere; the choice and its expected saving in the reply's Details."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from apps.chat.council import cache_ttl
from apps.chat.council.posting import message_post
from apps.chat.display.details import reply_details
from apps.chat.models import Message, MessageStatus
from apps.providers.emulator import Script
from apps.providers.pricing import PriceTable
from tests.conftest import wait_settled


def test_the_chance_of_a_long_pause_is_learned_from_the_gaps():
    fresh = cache_ttl.pause_chance([])
    assert 0.15 < fresh < 0.4  # people often read for minutes before answering
    assert cache_ttl.pause_chance([8.0] * 6) < 0.01  # a rapid-fire chat
    readers = cache_ttl.pause_chance([150.0, 120.0, 180.0, 140.0])  # two-minute readers
    assert 0.1 < readers < fresh
    assert cache_ttl.pause_chance([400.0, 30.0, 900.0]) > fresh  # some long pauses already


def test_the_hour_is_chosen_where_the_expected_saving_beats_the_dearer_write():
    slow = [600.0, 20.0, 700.0, 400.0]
    fast = [4.0] * 30
    closing = cache_ttl.choose(gaps=slow, prefix_tokens=9000, new_tokens=900, turns=4, closing=True)
    assert (closing.system, closing.history) == ("1h", "1h") and closing.expected_saving > 0
    assert "1 h" in closing.note() and "input tokens' worth" in closing.note()
    # A request another of its turn follows: its history would be read within seconds.
    parallel = cache_ttl.choose(
        gaps=slow, prefix_tokens=9000, new_tokens=900, turns=4, closing=False
    )
    assert (parallel.system, parallel.history) == ("1h", "5m")
    # A thread answered in seconds keeps everything for 5 minutes.
    quick = cache_ttl.choose(gaps=fast, prefix_tokens=9000, new_tokens=900, turns=30, closing=True)
    assert (quick.system, quick.history) == ("5m", "5m")
    # When nearly everything is new, keeping it an hour costs more than a likely pause saves.
    first = cache_ttl.choose(gaps=[], prefix_tokens=4000, new_tokens=4000, turns=0, closing=True)
    assert first.history == "5m"


@pytest.mark.django_db
def test_a_one_hour_write_is_priced_at_twice_the_input():
    table = PriceTable()
    usage = {"input": 0, "output": 0, "cache_read": 0, "cache_write": 1_000_000}
    five = table.cost("anthropic", "claude-sonnet-5", usage)
    hour = table.cost("anthropic", "claude-sonnet-5", {**usage, "cache_write_1h": 1_000_000})
    price = table.price("anthropic", "claude-sonnet-5")
    assert five.amount == price.cache_write
    assert hour.amount == 2 * price.input


def _age_the_thread(thread, *, gap: timedelta) -> None:
    """Space the stored turns `gap` apart: each person's message comes `gap` after the
    replies before it settled."""
    now = timezone.now()
    messages = list(Message.objects.filter(thread=thread).order_by("seq"))
    moment = now - gap * (len(messages) + 2)
    for message in messages:
        moment += gap if message.is_user else timedelta(seconds=5)
        Message.objects.filter(pk=message.pk).update(created_at=moment, finished_at=moment)


def _ttls(recorded) -> tuple[str, str]:
    body = recorded.body
    system = body["system"][-1]["cache_control"].get("ttl", "5m")
    history = next(
        block["cache_control"].get("ttl", "5m")
        for message in body["messages"]
        for block in message["content"]
        if "cache_control" in block
    )
    return system, history


@pytest.mark.django_db(transaction=True)
def test_after_slow_turns_the_closing_reply_keeps_the_cache_an_hour_and_the_next_turn_reads_it(
    alice, anthropic_thread, celery_worker, emulator
):
    for turn in range(3):
        emulator.script(Script(text=f"Answer {turn}. " * 200, provider="anthropic"))
        wait_settled(message_post(thread=anthropic_thread, author=alice, text=f"Q{turn}").replies)
    _age_the_thread(anthropic_thread, gap=timedelta(minutes=9))
    emulator.reset()
    posted = message_post(
        thread=anthropic_thread, author=alice, text="@editorial_architect @director thoughts?"
    )
    _parallel, director = wait_settled(posted.replies)
    assert director.speaker == "director" and director.status == MessageStatus.DONE
    by_speaker = {
        "editorial_architect": _ttls(emulator.requests[0]),
        "director": _ttls(emulator.requests[1]),
    }
    assert by_speaker == {"editorial_architect": ("1h", "5m"), "director": ("1h", "1h")}
    assert director.usage["cache_write_1h"] > 0
    details = reply_details(director)
    assert any("prompt cache: cache kept 1 h" in line for _, line in details["timeline"])

    # A pause longer than 5 minutes: the next turn still reads what the director kept.
    emulator.advance(7 * 60)
    (reply,) = wait_settled(
        message_post(thread=anthropic_thread, author=alice, text="@assistant and now?").replies
    )
    assert reply.usage["cache_read"] > reply.usage["cache_write"] > 0


@pytest.mark.django_db(transaction=True)
def test_a_quick_thread_stays_on_five_minutes(alice, anthropic_thread, celery_worker, emulator):
    for turn in range(6):
        wait_settled(message_post(thread=anthropic_thread, author=alice, text=f"Q{turn}").replies)
    _age_the_thread(anthropic_thread, gap=timedelta(seconds=8))
    (reply,) = wait_settled(
        message_post(thread=anthropic_thread, author=alice, text="one more").replies
    )
    assert _ttls(emulator.requests[-1]) == ("5m", "5m")
    assert "cache_control" in str(emulator.requests[-1].body)
    assert '"ttl"' not in str(emulator.requests[-1].body).replace("'", '"')
    assert reply.usage["cache_write_1h"] == 0
    assert any("cache kept 5 min" in line for _, line in reply_details(reply)["timeline"])
