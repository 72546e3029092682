"""The "while you were away" card: made once per person and return, by a real worker with
the demo provider, in the background (the page never waits), with links to the messages."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from apps.chat.council.digests import digest_for_return
from apps.chat.council.posting import message_post
from apps.chat.models import USER_SPEAKER, Digest, Message, MessageStatus, Thread
from apps.chat.records.rooms import member_add
from tests.conftest import wait_until


def settle_all(thread):
    Message.objects.filter(thread=thread, status=MessageStatus.QUEUED).update(
        status=MessageStatus.DONE, finished_at=timezone.now(),
        content=[{"type": "text", "text": "We keep the harbour scene and cut the chase."}],
    )  # fmt: skip


def busy_room(alice, thread, turns=3, *, worker=False):
    """Three turns of alice and the director. With a worker running, the turns are written
    as finished rows: a posted turn's reply would be the worker's to settle, and settling it
    by hand races a reply the worker has already started."""
    for n in range(turns):
        if not worker:
            message_post(thread=thread, author=alice, text=f"@director {n}: keep scene {n}?")
            settle_all(thread)
            continue
        thread.refresh_from_db()
        for seq, speaker, text in (
            (thread.next_seq, USER_SPEAKER, f"@director {n}: keep scene {n}?"),
            (thread.next_seq + 1, "director", "We keep the harbour scene and cut the chase."),
        ):
            Message.objects.create(
                thread=thread, seq=seq, speaker=speaker, status=MessageStatus.DONE,
                author=alice if speaker == USER_SPEAKER else None,
                content=[{"type": "text", "text": text}], finished_at=timezone.now(),
            )  # fmt: skip
        Thread.objects.filter(pk=thread.pk).update(next_seq=thread.next_seq + 2)


@pytest.mark.django_db
def test_no_card_for_a_room_of_one_or_for_a_little_news(alice, bob, alice_thread):
    busy_room(alice, alice_thread)
    assert digest_for_return(thread=alice_thread, user=alice, seen_before=0) is None  # alone
    member_add(session=alice_thread.session, by=alice, username="bob")
    assert digest_for_return(thread=alice_thread, user=bob, seen_before=4) is None  # 2 new


def test_a_returning_member_gets_one_digest_written_in_the_background(
    alice, bob, alice_thread, celery_worker
):
    member_add(session=alice_thread.session, by=alice, username="bob")
    busy_room(alice, alice_thread, worker=True)
    client = Client()
    client.force_login(bob)
    url = reverse("chat:thread_detail", kwargs={"thread": alice_thread.public_id})
    page = client.get(url).content.decode()
    assert 'id="digest-card"' in page and "Catching you up…" in page  # the page did not wait
    wait_until(lambda: Digest.objects.filter(status="done").exists(), timeout=20)
    digest = Digest.objects.get()
    assert (digest.user, digest.after_seq, digest.upto_seq) == (bob, 0, 6)
    assert digest.provider == "demo" and digest.text
    # Asking again for the same return finds the same one; nothing more is written.
    assert digest_for_return(thread=alice_thread, user=bob, seen_before=0).pk == digest.pk
    assert Digest.objects.count() == 1
    # Back with nothing new: no card. After more happened: a new one, for that return.
    assert 'id="digest-card"' not in client.get(url).content.decode()
    busy_room(alice, alice_thread, worker=True)
    page = client.get(url).content.decode()
    assert 'id="digest-card"' in page
    assert Digest.objects.filter(user=bob, after_seq=6).exists()
    wait_until(lambda: not Digest.objects.filter(status="pending").exists(), timeout=20)


@pytest.mark.django_db
def test_a_digest_links_its_citations_to_the_messages(alice, bob, alice_thread):
    from apps.chat.display.rooms import digest_context

    member_add(session=alice_thread.session, by=alice, username="bob")
    busy_room(alice, alice_thread)
    digest = digest_for_return(thread=alice_thread, user=bob, seen_before=0)
    digest.status, digest.text = "done", "- Alice kept scene 1 [#3]. <script>x</script>"
    html = str(digest_context(digest)["digest_html"])
    third = Message.objects.get(thread=alice_thread, seq=3)
    target = f"?at={third.public_id}#msg-{third.public_id}"
    assert f'{target}" rel="noopener noreferrer nofollow">#3</a>' in html
    assert "<script>" not in html


@pytest.mark.django_db(transaction=True)
async def test_a_card_written_before_the_tab_followed_arrives_when_it_syncs(
    alice, bob, alice_thread
):
    """The page showed "Catching you up…"; the card was written (and pushed) before the tab's
    socket followed bob's pushes: the tab's sync asks for it and gets it as it is now."""
    import asyncio
    import json

    from channels.db import database_sync_to_async
    from channels.testing import WebsocketCommunicator

    from config.asgi import application
    from tests.chat.test_live_streaming import session_cookie

    digest = await Digest.objects.acreate(
        thread=alice_thread, user=bob, after_seq=0, upto_seq=6, status="done",
        text="Alice decided to keep the harbour scene.",
    )  # fmt: skip
    await database_sync_to_async(member_add)(session=alice_thread.session, by=alice, username="bob")
    headers = [(b"origin", b"http://localhost"),
               (b"cookie", await database_sync_to_async(session_cookie)(bob))]  # fmt: skip
    tab = WebsocketCommunicator(application, f"/ws/threads/{alice_thread.public_id}/", headers)
    assert (await tab.connect(timeout=10))[0]
    await tab.send_to(
        text_data=json.dumps({"type": "sync", "after_seq": 6, "pending": [], "digest": digest.pk})
    )
    frames = []
    async with asyncio.timeout(10):
        while 'data-synced="true"' not in (frame := await tab.receive_from(timeout=10)):
            frames.append(frame)
    await tab.disconnect()
    (card,) = [f for f in frames if 'id="digest-card"' in f]
    assert "digest-card--done" in card and "keep the harbour scene" in card
