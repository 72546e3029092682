"""A member's daily token budget holds under concurrency and on every path that starts a
reply (issue 33 item 4): posts, commands, retry, regenerate, /retry, continue, edit, new chat
and auto-rounds reserve against it atomically; a settled run's usage is added, never
replaced."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest
from django.core.exceptions import ValidationError
from django.db import close_old_connections
from django.test import Client
from django.urls import reverse

from apps.api.tokens import token_create
from apps.chat.council.posting import message_edit, message_post
from apps.chat.council.replies import reply_continue, reply_rerun
from apps.chat.models import BudgetDay, Message, MessageStatus, Thread
from apps.chat.records.budgets import budget_standing
from apps.chat.records.replies import message_finish
from apps.chat.records.rooms import member_add, member_set_budget
from apps.chat.records.threads import thread_create

pytestmark = pytest.mark.django_db

REFUSED = "You have used your"


@pytest.fixture
def room(alice, bob, alice_thread):
    session = alice_thread.session
    membership = member_add(session=session, by=alice, username="bob")
    member_set_budget(membership=membership, by=alice, tokens=823)
    return alice_thread


def finish(reply: Message, tokens: int, text: str = "Noted.", **extra) -> Message:
    """Settle a reply as the worker does (through `message_finish`), having used `tokens`."""
    Message.objects.filter(pk=reply.pk).update(status=MessageStatus.STREAMING)
    return message_finish(
        message_id=reply.pk, status=MessageStatus.DONE,
        content=[{"type": "text", "text": text}], usage={"input": tokens - 1, "output": 1},
        **extra,
    )  # fmt: skip


def spend(room, bob, tokens: int) -> Message:
    posted = message_post(thread=room, author=bob, text="@director spend")
    return finish(posted.replies[0], tokens)


def test_the_budget_is_spent_by_settled_runs_and_a_rerun_adds(room, alice, bob):
    first = spend(room, bob, 300)
    assert budget_standing(session=room.session, person=bob) == (823, 300, 0)
    again = reply_rerun(message=first, by=bob)
    assert budget_standing(session=room.session, person=bob)[2] > 0  # reserved while it runs
    finish(again, 200)
    assert budget_standing(session=room.session, person=bob) == (823, 500, 0)  # added
    # The owner's own runs are the owner's: not charged to anyone's budget.
    rerun = reply_rerun(message=Message.objects.get(pk=first.pk), by=alice)
    finish(rerun, 900)
    assert budget_standing(session=room.session, person=bob) == (823, 500, 0)


@pytest.mark.django_db(transaction=True)
def test_twenty_concurrent_posts_stop_at_the_budget(room, alice, bob):
    """74 tokens left and 20 posts at once, each in its own thread: one starts (the overshoot
    is at most that one reply's reservation), 19 are refused, none is saved."""
    spend(room, bob, 749)
    threads = [thread_create(session=room.session) for _ in range(20)]

    def post(thread: Thread) -> str:
        try:
            message_post(thread=thread, author=bob, text="@assistant @director go")
            return "posted"
        except ValidationError as exc:
            return "refused" if REFUSED in " ".join(exc.messages) else str(exc)
        finally:
            close_old_connections()

    with ThreadPoolExecutor(max_workers=20) as pool:
        outcomes = list(pool.map(post, threads))
    assert sorted(outcomes) == ["posted"] + ["refused"] * 19
    started = Message.objects.filter(thread__in=threads, speaker="user")
    assert started.count() == 1
    running = Message.objects.filter(thread__in=threads, status__in=["queued", "streaming"])
    assert running.count() == 2  # the one post's two replies
    day = BudgetDay.objects.get(user=bob)
    print(f"20 concurrent posts near the budget: {sorted(outcomes).count('posted')} posted, "
          f"{day.spent} tokens spent")  # fmt: skip
    assert day.spent == 749


def test_every_path_that_starts_a_reply_is_refused_past_the_budget(room, alice, bob):
    earlier = spend(room, bob, 100)
    cut = finish(
        message_post(thread=room, author=bob, text="@director more").replies[0],
        800,
        stop_reason="max_tokens",
    )  # fmt: skip  (900 spent of 823)
    for text in ("@director again", "/length short @assistant hello", "/w @director psst"):
        with pytest.raises(ValidationError, match=REFUSED):
            message_post(thread=room, author=bob, text=text)
    with pytest.raises(ValidationError, match=REFUSED):
        reply_rerun(message=earlier, by=bob)
    with pytest.raises(ValidationError, match=REFUSED):
        reply_continue(message=cut, by=bob)
    Message.objects.filter(pk=cut.pk).update(status=MessageStatus.ERROR)  # the last turn's
    with pytest.raises(ValidationError, match=REFUSED):
        message_post(thread=room, author=bob, text="/retry")
    assert Message.objects.get(pk=cut.pk).status == MessageStatus.ERROR  # nothing ran
    # Edit and new chat leave no empty thread behind.
    mine = Message.objects.filter(thread=room, author=bob).first()
    threads_before = Thread.objects.count()
    with pytest.raises(ValidationError, match=REFUSED):
        message_edit(message=mine, author=bob, text="edited")
    client = Client()
    client.force_login(bob)
    refused = client.post(reverse("chat:message_new_chat", kwargs={"message": mine.public_id}))
    assert refused.status_code == 422 and REFUSED in refused.content.decode()
    rerun = client.post(reverse("chat:message_rerun", kwargs={"message": earlier.public_id}))
    assert rerun.status_code == 409 and REFUSED in rerun.content.decode()
    assert Thread.objects.count() == threads_before
    # The API says 429 with the reason.
    raw = token_create(user=bob, name="t", scope="post")[1]
    headers = {"HTTP_AUTHORIZATION": f"Bearer {raw}"}
    posted = Client().post(
        f"/api/v1/threads/{room.public_id}/messages", {"text": "@director hi"},
        content_type="application/json", **headers,
    )  # fmt: skip
    assert posted.status_code == 429 and REFUSED in posted.json()["detail"]
    retried = Client().post(f"/api/v1/messages/{earlier.public_id}/regenerate", **headers)
    assert retried.status_code == 429
    assert budget_standing(session=room.session, person=bob) == (823, 900, 0)
    # The owner goes on.
    message_post(thread=room, author=alice, text="@director the owner goes on")


def test_runs_before_a_budget_is_set_count_toward_the_day(alice, bob, alice_thread):
    """The rule the People dialog shows: every settled run of a member adds to their day,
    whether or not a budget was set when it ran; a budget set later counts them."""
    membership = member_add(session=alice_thread.session, by=alice, username="bob")
    spend(alice_thread, bob, 70)
    assert budget_standing(session=alice_thread.session, person=bob) is None  # no budget yet
    owner = Client()
    owner.force_login(alice)
    people = reverse("chat:room_panel", kwargs={"session": alice_thread.session.public_id})
    assert "70 tokens used today" in owner.get(people).content.decode()
    member_set_budget(membership=membership, by=alice, tokens=60)
    assert budget_standing(session=alice_thread.session, person=bob) == (60, 70, 0)
    assert "70 of 60 used today" in owner.get(people).content.decode()
    with pytest.raises(ValidationError, match=REFUSED):
        message_post(thread=alice_thread, author=bob, text="@director one more")
