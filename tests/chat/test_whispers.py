"""Whispers and people in a shared room: a whisper is seen by its audience alone — pages,
tabs, search, exports, unread counts and other roles' requests — people are named to the
roles, and a member's daily token budget holds."""

from __future__ import annotations

import asyncio

import pytest
from channels.db import database_sync_to_async
from django.core.exceptions import ValidationError
from django.utils import timezone

from apps.chat.council.posting import message_post
from apps.chat.council.requests import request_for_reply, transcript_entries
from apps.chat.display.exports import export_json, export_markdown
from apps.chat.models import Message, MessageStatus
from apps.chat.reading import thread_unread
from apps.chat.records.rooms import member_add, member_set_budget
from apps.chat.search import search_session
from apps.chat.selectors import transcript_page
from tests.chat.tabs import Tab
from tests.chat.test_budgets import finish
from tests.chat.test_live_streaming import open_tab, session_cookie

pytestmark = pytest.mark.django_db


@pytest.fixture
def room(alice, bob, charlie, alice_thread):
    session = alice_thread.session
    member_add(session=session, by=alice, username="bob")
    member_add(session=session, by=alice, username="charlie")
    return alice_thread


def settle(messages, text="Noted."):
    for message in messages:
        Message.objects.filter(pk=message.pk).update(
            status=MessageStatus.DONE, content=[{"type": "text", "text": text}],
            finished_at=timezone.now(), usage={"input": 10, "output": 5},
        )  # fmt: skip


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("/whisper hello there", "Say who the whisper is for"),
        ("/whisper @director", "needs something to say"),
        ("/whisper @nobody hi", "Nobody in this room is called @nobody"),
        ("/whisper @alice hi", "besides yourself"),
    ],
)
def test_a_whisper_that_cannot_go_says_why_and_posts_nothing(room, alice, text, error):
    with pytest.raises(ValidationError, match=error):
        message_post(thread=room, author=alice, text=text)
    assert not Message.objects.filter(thread=room).exists()


def test_a_whisper_is_seen_only_by_its_audience_everywhere(room, alice, bob, charlie):
    message_post(thread=room, author=alice, text="@director what is the plan?")
    settle(Message.objects.filter(thread=room, status=MessageStatus.QUEUED))
    posted = message_post(
        thread=room, author=bob, text="/whisper @director @alice the budget is secret: zanzibar"
    )
    whisper, (reply,) = posted.user_message, posted.replies
    assert whisper.text == "the budget is secret: zanzibar" and reply.speaker == "director"
    settle([reply], text="Understood, zanzibar stays between us.")
    audience = {alice.pk, bob.pk}
    for message in (whisper, reply):
        stored = Message.objects.get(pk=message.pk)
        assert stored.private and set(stored.audience.values_list("pk", flat=True)) == audience

    def shown(user) -> set[int]:
        page = transcript_page(thread=room, user=user)
        return {m.pk for m in page.own}

    assert {whisper.pk, reply.pk} <= shown(alice) and {whisper.pk, reply.pk} <= shown(bob)
    assert not {whisper.pk, reply.pk} & shown(charlie)
    assert search_session(session=room.session, user=bob, query="zanzibar")
    assert not search_session(session=room.session, user=charlie, query="zanzibar")
    assert "zanzibar" in export_markdown(room, user=alice)[0]
    assert "whisper to" in export_markdown(room, user=alice)[0]
    for export in (export_markdown, export_json):
        assert "zanzibar" not in export(room, user=charlie)[0]
    # charlie has nothing unread of it; alice has (bob's whisper and the reply)
    assert thread_unread(thread_id=room.pk, user=charlie).unread == 2  # alice and the reply
    assert thread_unread(thread_id=room.pk, user=alice).unread == 3

    # Another role's request never carries it; the director's, later, does.
    later = message_post(thread=room, author=charlie, text="@all next scene?")
    requests = {r.speaker: request_for_reply(message=r) for r in later.replies}
    for handle, request in requests.items():
        body = str(request.messages) + str(request.system)
        assert ("zanzibar" in body) == (handle == "director"), handle


def test_the_roles_see_who_is_speaking_by_name_in_a_shared_room(room, alice, bob):
    bob.first_name, bob.last_name = "Sam", "Rivera"
    bob.save()
    message_post(thread=room, author=bob, text="@director a long tracking shot")
    settle(Message.objects.filter(thread=room, status=MessageStatus.QUEUED))
    asked = message_post(
        thread=room, author=alice, text="@director what do you think of Sam's idea?"
    )
    names = [entry.speaker_name for entry in transcript_entries(message=asked.replies[0])]
    assert names[:3] == ["Sam Rivera", "Director", "alice"]


def test_a_solo_session_still_calls_its_person_user(alice, alice_thread):
    message_post(thread=alice_thread, author=alice, text="@director hello")
    settle(Message.objects.filter(thread=alice_thread, status=MessageStatus.QUEUED))
    asked = message_post(thread=alice_thread, author=alice, text="@director again")
    assert transcript_entries(message=asked.replies[0])[0].speaker_name == "User"


def test_a_members_daily_token_budget_stops_their_messages_not_the_owners(room, alice, bob):
    membership = room.session.memberships.get(user=bob)
    member_set_budget(membership=membership, by=alice, tokens=20)
    posted = message_post(thread=room, author=bob, text="@director one")
    finish(posted.replies[0], 15)
    posted = message_post(thread=room, author=bob, text="@director two")
    finish(posted.replies[0], 15)  # 30: over
    with pytest.raises(ValidationError, match="You have used your 20 tokens for today"):
        message_post(thread=room, author=bob, text="@director three")
    message_post(thread=room, author=alice, text="@director the owner goes on")


@pytest.mark.django_db(transaction=True)
async def test_only_the_audiences_tabs_receive_a_whisper_live(room, alice, bob, charlie):
    tabs = {}
    for person in (alice, bob, charlie):
        cookie = await database_sync_to_async(session_cookie)(person)
        tabs[person.username] = (await open_tab(cookie, room), Tab())
    for communicator, tab in tabs.values():
        async with asyncio.timeout(10):
            while not tab.synced:
                tab.apply(await communicator.receive_from(timeout=10))
    posted = await database_sync_to_async(message_post)(
        thread=room, author=bob, text="/whisper @alice lunch at noon? (no roles)"
    )
    message_id = str(posted.user_message.public_id)
    for name in ("alice", "bob"):
        communicator, tab = tabs[name]
        async with asyncio.timeout(10):
            while message_id not in tab.bubbles:
                tab.apply(await communicator.receive_from(timeout=10))
        assert "whisper · " in tab.bubbles[message_id].html
    public = await database_sync_to_async(message_post)(
        thread=room, author=alice, text="@director hi"
    )
    communicator, tab = tabs["charlie"]
    async with asyncio.timeout(10):
        while str(public.user_message.public_id) not in tab.bubbles:
            tab.apply(await communicator.receive_from(timeout=10))
    assert message_id not in tab.bubbles
    assert not any("lunch at noon" in frame for frame in tab.frames)
    for communicator, _ in tabs.values():
        await communicator.disconnect()


def test_a_member_cannot_change_the_sessions_settings_by_command(room, bob):
    for text in (
        "/mute @director",
        "/rounds 3",
        "/mode broadcast",
        "/length short",
        "/queue clear",
    ):
        with pytest.raises(ValidationError, match="Only the session's owner changes its settings"):
            message_post(thread=room, author=bob, text=text)
    message_post(thread=room, author=bob, text="/length short @director a quick one")
    assert (
        "/whisper @role @username message"
        in message_post(thread=room, author=bob, text="/help").notices[0].text
    )


def test_a_mention_of_someone_by_username_or_name_notifies_them_always(room, alice, bob, charlie):
    from apps.chat.access import mentioned_people
    from apps.chat.display.bubbles import render_someone_posted

    bob.first_name, bob.last_name = "Sam", "Rivera"
    bob.save()
    session = room.session
    assert mentioned_people(session=session, text="what do you think, Sam Rivera?") == {bob.pk}
    assert mentioned_people(session=session, text="@charlie and @nobody") == {charlie.pk}
    assert mentioned_people(session=session, text="email charlie@example.com") == set()
    posted = message_post(thread=room, author=alice, text="@director ask @charlie too")
    for_charlie = render_someone_posted(posted.user_message, user=charlie, mentioned=True)
    assert 'data-title="alice mentioned you"' in for_charlie and 'data-always="true"' in for_charlie
    for_bob = render_someone_posted(posted.user_message, user=bob, mentioned=False)
    assert 'data-title="alice wrote"' in for_bob and "data-always" not in for_bob
    assert f'id="unread-{room.public_id}"' in for_bob  # their badge for the thread


def test_a_whisper_never_names_the_thread(room, alice, bob, django_capture_on_commit_callbacks):
    """First message, the reply to one, or after a first public message too short to name:
    the thread's name comes from what everyone may read, or stays empty."""
    from apps.chat.records.threads import thread_autoname_from_replies

    with django_capture_on_commit_callbacks(execute=True):
        posted = message_post(
            thread=room, author=bob, text="/whisper @alice @director Zanzibar quokka merger plans"
        )
    finish(posted.replies[0], 10, text="Zanzibar quokka merger: a bold acquisition strategy")
    room.refresh_from_db()
    assert room.label == ""
    thread_autoname_from_replies(thread=room)  # what runs once a turn has settled
    room.refresh_from_db()
    assert room.label == ""
    hello = message_post(thread=room, author=alice, text="hi")  # too short to name anything
    for reply in hello.replies:
        finish(reply, 10, text="Hello")
    whispered = message_post(
        thread=room, author=bob, text="/w @director secret harbour lighting budget numbers"
    )
    finish(whispered.replies[0], 10, text="Secret harbour lighting budget: forty thousand")
    thread_autoname_from_replies(thread=room)
    room.refresh_from_db()
    assert room.label == ""
    with django_capture_on_commit_callbacks(execute=True):
        message_post(thread=room, author=alice, text="@director the storyboard for act two")
    room.refresh_from_db()
    assert room.label == "Storyboard Act Two"


def test_a_whisper_is_not_auto_routed_and_its_usage_stays_out_of_the_rooms_figures(
    room, alice, bob
):
    from apps.chat.usage import thread_usage

    session = room.session
    session.auto_route = True
    session.save()
    posted = message_post(
        thread=room, author=bob, text="/w @assistant How should we light the harbour?"
    )
    assert [reply.speaker for reply in posted.replies] == ["assistant"]
    assert not Message.objects.get(pk=posted.user_message.pk).routed  # no undo to re-post it
    finish(posted.replies[0], 500)
    assert thread_usage(thread=room).replies == 0
