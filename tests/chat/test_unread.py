"""While you were away (issue 15, item 4) on the server: replies settled after what the owner
last saw are unread — in the sidebar, in the sessions list — until the thread is seen."""

from __future__ import annotations

import pytest
from django.urls import reverse

from apps.chat.models import Message, MessageStatus, Session, Thread
from apps.chat.reading import seen_seq, with_unread_sessions
from apps.chat.records.threads import thread_create, thread_mark_seen
from apps.chat.selectors import thread_tree
from tests.chat.test_threads import say as posted

pytestmark = pytest.mark.django_db


def say(thread, text):
    """A message and its replies, settled (as the worker leaves them)."""
    from django.utils import timezone

    from apps.chat.models import Message

    result = posted(thread, text)
    Message.objects.filter(pk__in=[r.pk for r in result.replies]).update(finished_at=timezone.now())
    return result


def test_settled_replies_after_the_last_seen_message_are_unread(alice_thread, alice):
    other = thread_create(session=alice_thread.session)
    say(alice_thread, "@all what next?")  # the film crew: six settled replies
    tree = thread_tree(session=alice_thread.session, user=alice)
    counts = {thread.pk: thread.unread for thread, _ in tree}
    assert counts == {alice_thread.pk: 6, other.pk: 0}
    assert with_unread_sessions(Session.objects.all(), user=alice).get().unread == 6
    before = thread_mark_seen(thread=alice_thread, user=alice)
    assert before == 0
    tree = thread_tree(session=alice_thread.session, user=alice)
    counts = {thread.pk: thread.unread for thread, _ in tree}
    assert counts[alice_thread.pk] == 0
    thread_mark_seen(thread=Thread.objects.get(pk=alice_thread.pk), user=alice, seq=2)
    assert seen_seq(thread=alice_thread, user=alice) == 7  # never goes back


def test_pages_show_the_counts_and_where_the_new_ones_start(client, alice_thread, bob):
    say(alice_thread, "hello")
    client.force_login(alice_thread.session.owner)
    assert '>1<span class="visually-hidden"> new</span>' in client.get("/").content.decode()
    url = reverse("chat:thread_detail", kwargs={"thread": alice_thread.public_id})
    assert 'data-seen-seq="0"' in client.get(url).content.decode()  # first visit: all seen now
    say(alice_thread, "more")
    page = client.get(url).content.decode()
    assert 'data-seen-seq="2"' in page  # the divider goes before message 3
    assert ' hidden title="0 new replies">0<' in client.get("/").content.decode()
    seen = reverse("chat:thread_seen", kwargs={"thread": alice_thread.public_id})
    assert client.post(seen, {"seq": "nonsense"}).status_code == 400
    assert client.post(seen, {"seq": "99"}).status_code == 204
    client.force_login(bob)
    assert client.post(seen, {"seq": "1"}).status_code == 404


def test_a_finished_turns_notice_escapes_names_and_says_nothing_when_all_is_read(alice_thread):
    from apps.chat.display.bubbles import render_turn_finished
    from apps.chat.records.threads import thread_rename

    hostile = '"><img src=x onerror=alert(1)>'
    thread_rename(thread=alice_thread, label=hostile)
    reply = say(alice_thread, "hello").replies[0]
    Message.objects.filter(pk=reply.pk).update(status=MessageStatus.INTERRUPTED)
    owner = alice_thread.session.owner
    html = render_turn_finished(Thread.objects.get(pk=alice_thread.pk), user=owner)
    assert 'class="turn-notice"' in html and "<img" not in html
    assert ' replied — 1 stopped"' in html  # a stopped reply is not said to have answered
    assert "&quot;&gt;&lt;img src=x onerror=alert(1)&gt;" in html
    thread_mark_seen(thread=alice_thread, user=owner)
    html = render_turn_finished(Thread.objects.get(pk=alice_thread.pk), user=owner)
    assert 'class="turn-notice"' not in html  # read already: no notification, the badge hidden
    assert f'id="unread-{alice_thread.session.public_id}"' in html and " hidden " in html
