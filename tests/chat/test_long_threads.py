"""Long threads: the page shows the latest messages, earlier ones load as the reader scrolls up,
and a websocket sync works whatever the length."""

from __future__ import annotations

import re

import pytest
from channels.db import database_sync_to_async

from apps.chat.display.frames import MAX_FRAME_BYTES
from apps.chat.models import Message
from apps.chat.records.threads import thread_branch
from apps.chat.selectors import PAGE_SIZE, transcript_messages, transcript_page
from bench.long_threads import thread_fill as fill
from tests.chat.tabs import Tab
from tests.chat.test_live_streaming import open_tab, read_until, session_cookie

ARTICLE_SEQ = re.compile(r'<article id="(?:inherited-)?msg-[0-9a-f-]{36}"[^>]*data-seq="(\d+)"')


def seqs_in(html: str) -> list[int]:
    return [int(seq) for seq in ARTICLE_SEQ.findall(html)]


@pytest.mark.django_db
def test_a_long_thread_page_shows_the_latest_messages_and_loads_earlier_ones_on_request(
    alice, bob, alice_thread, client, django_assert_max_num_queries
):
    fill(alice_thread, 5_000)
    client.force_login(alice)
    # (Two of them: whether others are in the room, and the person's own read mark; six the
    # last turn's, the recent replies' and the models' figures of the session and the thread;
    # one what the roles' models read, for the picker's "reads a description" of images.)
    with django_assert_max_num_queries(19):
        page = client.get(f"/t/{alice_thread.public_id}/")
    html = page.content.decode()
    assert seqs_in(html) == list(range(5_000 - PAGE_SIZE + 1, 5_001))
    oldest = Message.objects.get(thread=alice_thread, seq=5_000 - PAGE_SIZE + 1)
    assert f"/earlier/?before={oldest.public_id}" in html
    assert 'hx-trigger="revealed, click"' in html

    earlier = client.get(f"/t/{alice_thread.public_id}/earlier/?before={oldest.public_id}")
    assert earlier.status_code == 200
    part = earlier.content.decode()
    assert seqs_in(part) == list(range(5_000 - 2 * PAGE_SIZE + 1, 5_000 - PAGE_SIZE + 1))
    assert 'hx-swap-oob="afterbegin:#transcript"' in part
    next_cursor = Message.objects.get(thread=alice_thread, seq=5_000 - 2 * PAGE_SIZE + 1)
    assert f"before={next_cursor.public_id}" in part

    first = Message.objects.get(thread=alice_thread, seq=1)
    last_page = client.get(f"/t/{alice_thread.public_id}/earlier/?before={first.public_id}")
    assert seqs_in(last_page.content.decode()) == []  # nothing before the first message
    assert "/earlier/" not in last_page.content.decode()

    # Someone else's thread or message, or a message of another thread: nothing is shown.
    client.force_login(bob)
    assert (
        client.get(f"/t/{alice_thread.public_id}/earlier/?before={first.public_id}").status_code
        == 404
    )
    client.force_login(alice)
    assert client.get(f"/t/{alice_thread.public_id}/earlier/?before=nonsense").status_code == 400


@pytest.mark.django_db
def test_pages_of_a_branch_of_a_branch_walk_back_through_every_ancestor_exactly(
    alice_thread, alice
):
    root = fill(alice_thread, 30, notices_every=7)
    child = thread_branch(thread=alice_thread, message=root[19])  # forks at seq 20
    fill(child, 12, notices_every=5)
    child_messages = list(Message.objects.filter(thread=child).order_by("seq"))
    grandchild = thread_branch(thread=child, message=child_messages[5])
    fill(grandchild, 9)

    expected = [m.pk for m in transcript_messages(thread=grandchild)]
    own = {m.pk for m in Message.objects.filter(thread=grandchild)}
    expected = [pk for pk in expected if pk not in own] + [
        m.pk for m in Message.objects.filter(thread=grandchild).order_by("seq")
    ]  # the page also shows the branch's own notices
    walked: list[int] = []
    page = transcript_page(thread=grandchild, user=alice, size=8)
    while True:
        walked = [m.pk for m in page.inherited + page.own] + walked
        assert all(m.thread_id == grandchild.pk for m in page.own)
        assert all(m.thread_id != grandchild.pk for m in page.inherited)
        if page.earlier is None:
            break
        page = transcript_page(thread=grandchild, user=alice, before=page.earlier, size=8)
    assert walked == expected
    # A message of the root after the fork point is not in this transcript.
    assert transcript_page(thread=grandchild, user=alice, before=root[25]) is None


@pytest.mark.django_db
def test_a_fresh_branch_of_a_ten_thousand_message_thread_opens_with_its_latest_history(
    alice, alice_thread, client, django_assert_max_num_queries
):
    messages = fill(alice_thread, 10_000)
    branch = thread_branch(thread=alice_thread, message=messages[-1])
    client.force_login(alice)
    with django_assert_max_num_queries(19):  # (as above)
        html = client.get(f"/t/{branch.public_id}/").content.decode()
    assert seqs_in(html) == list(range(10_000 - PAGE_SIZE + 1, 10_001))
    assert html.count('id="inherited-msg-') == PAGE_SIZE
    assert "Branch starts here." in html
    part = client.get(
        f"/t/{branch.public_id}/earlier/?before={messages[-PAGE_SIZE].public_id}"
    ).content.decode()
    assert 'hx-swap-oob="afterbegin:#inherited"' in part
    assert seqs_in(part) == list(range(10_000 - 2 * PAGE_SIZE + 1, 10_000 - PAGE_SIZE + 1))


@pytest.mark.django_db(transaction=True)
async def test_a_tab_syncs_a_five_thousand_message_thread_in_frames_under_the_limit(
    alice, alice_thread
):
    await database_sync_to_async(fill)(alice_thread, 5_000)
    cookie = await database_sync_to_async(session_cookie)(alice)

    # A page showing the latest messages asks only for what follows them: nothing.
    tab = Tab()
    communicator = await open_tab(cookie, alice_thread, after_seq=5_000)
    await read_until(communicator, tab, lambda: tab.synced)
    await communicator.disconnect()
    assert tab.bubbles == {}

    # A tab that shows nothing at all gets every message, in frames daphne accepts.
    empty = Tab()
    communicator = await open_tab(cookie, alice_thread, after_seq=0)
    await read_until(communicator, empty, lambda: empty.synced, 60)
    await communicator.disconnect()
    assert len(empty.bubbles) == 5_000
    assert max(len(frame.encode()) for frame in empty.frames) <= MAX_FRAME_BYTES + 1024
    assert len(empty.frames) > 2
