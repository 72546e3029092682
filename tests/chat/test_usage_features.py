"""Issue 15 on the server side: cost from the price table, search across a session's threads
(PostgreSQL full-text or the plain scan), opening a thread at a message, the HTML export."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.urls import reverse

from apps.chat.models import Message, MessageStatus
from apps.chat.records.threads import thread_create, thread_rename
from apps.chat.search import search_session
from apps.chat.selectors import PAGE_SIZE
from apps.chat.usage import (
    session_and_thread_usage,
    session_and_threads_usage,
    session_usage,
    thread_usage,
)
from apps.providers.models import ModelPrice
from apps.providers.pricing import PriceTable, format_money
from bench.long_threads import thread_fill
from tests.chat.test_long_threads import seqs_in

pytestmark = pytest.mark.django_db


def price(model="claude-sonnet-5", provider="anthropic", **rates):
    values = {"input": "3", "output": "15", "cache_read": "0.30", "cache_write": "3.75", **rates}
    return ModelPrice.objects.update_or_create(  # the shipped prices may be there already
        provider=provider,
        model=model,
        defaults={f"{key}_per_mtok": Decimal(value) for key, value in values.items()},
    )[0]


def reply(thread, *, model="claude-sonnet-5", provider="anthropic", text="An answer.", **usage):
    seq = thread.next_seq
    thread.next_seq += 1
    thread.save(update_fields=["next_seq"])
    from django.utils import timezone

    return Message.objects.create(
        thread=thread, seq=seq, speaker="director", status=MessageStatus.DONE,
        content=[{"type": "text", "text": text}], provider=provider, model=model,
        usage={"input": 0, "output": 0, "cache_read": 0, "cache_write": 0, **usage},
        finished_at=timezone.now(), duration_ms=4_200,
    )  # fmt: skip


def test_the_price_table_matches_by_longest_prefix_and_prices_every_token_kind():
    price("claude-sonnet-5")
    price("claude-sonnet-5-fast", input="6")
    table = PriceTable()
    assert table.price("anthropic", "claude-sonnet-5-20260301").input == Decimal("3")
    assert table.price("anthropic", "claude-sonnet-5-fast-1").input == Decimal("6")
    assert table.price("openai", "claude-sonnet-5") is None
    usage = {"input": 1_000_000, "output": 100_000, "cache_read": 2_000_000, "cache_write": 0}
    cost = table.cost("anthropic", "claude-sonnet-5", usage)
    assert cost.amount == Decimal("3") + Decimal("1.5") + Decimal("0.6")
    assert cost.cache_saved == Decimal("2") * (Decimal("3") - Decimal("0.30"))
    assert format_money(Decimal("0.01234")) == "$0.0123"
    assert format_money(Decimal("12.345")) == "$12.35"


def test_session_and_thread_cost_follow_the_price_table_and_stored_usage(alice_thread, client):
    price()
    other = thread_create(session=alice_thread.session)
    reply(alice_thread, input=1_000, output=500, cache_read=10_000, cache_write=2_000)
    reply(other, input=2_000, output=1_000)
    reply(other, model="mystery-1", input=5, output=5)  # no price: counted apart
    # 1000*3 + 500*15 + 10000*0.3 + 2000*3.75 = 21,000 millionths; 2000*3 + 1000*15 = 21,000.
    assert thread_usage(thread=alice_thread).cost == Decimal("0.021")
    session = session_usage(session=alice_thread.session)
    assert session.cost == Decimal("0.042") and session.unpriced == 1
    assert (
        session.cache_saved
        == (Decimal(10_000) * Decimal("2.7") - Decimal(2_000) * Decimal("0.75")) / 1_000_000
    )
    # A thread's page reads both in one query: the same figures.
    together = session_and_thread_usage(session=alice_thread.session, thread=alice_thread)
    assert together == (session, thread_usage(thread=alice_thread))
    # Replies settling in several threads at once: one grouped read for all of them.
    total, own = session_and_threads_usage(
        session=alice_thread.session, thread_ids=[alice_thread.pk, other.pk]
    )
    assert total == session
    assert own == {alice_thread.pk: thread_usage(thread=alice_thread),
                   other.pk: thread_usage(thread=other)}  # fmt: skip
    client.force_login(alice_thread.session.owner)
    page = client.get(reverse("chat:thread_detail", kwargs={"thread": alice_thread.public_id}))
    html = page.content.decode()
    assert "<dt>Cost</dt><dd" in html and "$0.0420" in html  # the session
    assert 'id="thread-usage"' in html and "$0.0210" in html  # this thread
    assert "<dt>Cache read / write</dt><dd>10000 / 2000</dd>" in html
    # Each reply: how long it took, and its tokens and cost on hover.
    assert "took 4.2 s" in html
    assert "1,000 in · 500 out · 10,000 cache read · 2,000 cache write · cost $0.0210" in html


def test_admin_usage_sums_cost_over_the_filter(admin_client, alice_thread):
    price()
    reply(alice_thread, input=1_000_000)
    page = admin_client.get(reverse("admin:chat_messageusage_changelist")).content.decode()
    assert 'id="usage-cost">$3.00<' in page


def test_search_finds_words_in_any_case_and_by_prefix_across_threads(alice_thread, bob):
    session = alice_thread.session
    thread_rename(thread=alice_thread, label="Harbour")
    other = thread_create(session=session)
    reply(alice_thread, text="The HARBOUR at dawn, with <b>gulls</b>.")
    reply(other, text="A market scene: harbourside stalls and gulls.")
    reply(other, text="Nothing to see here.")
    hits = search_session(session=session, user=session.owner, query="harb GULLS")
    assert {hit.message.thread_id for hit in hits} == {alice_thread.pk, other.pk}
    first = next(hit for hit in hits if hit.message.thread_id == alice_thread.pk)
    assert first.speaker == "Director"
    assert (
        "<mark>HARBOUR</mark>" in first.snippet and "&lt;b&gt;<mark>gulls</mark>" in first.snippet
    )
    assert search_session(session=session, user=session.owner, query="   ") == []
    assert search_session(session=session, user=session.owner, query="zebra") == []
    from apps.chat.records.sessions import session_create

    bobs = session_create(owner=bob, name="Bob's")
    reply(bobs.active_thread, text="harbour secrets")
    assert all(
        hit.message.thread.session_id == session.pk
        for hit in search_session(session=session, user=session.owner, query="harbour")
    )


def test_search_finds_a_message_by_the_name_of_its_attachment(alice_thread, bob):
    from apps.chat.council.posting import message_post
    from apps.chat.records.attachments import attachment_add
    from apps.chat.records.rooms import member_add
    from tests.chat.test_whispers import settle

    session = alice_thread.session
    alice = session.owner
    member_add(session=session, by=alice, username="bob")
    chart = attachment_add(session=session, owner=alice, thread=alice_thread,
                           name="Q3 revenue-chart.csv", data=b"1,2,3\n")  # fmt: skip
    posted = message_post(
        thread=alice_thread, author=alice, text="what do you see?", attachments=[chart]
    )
    settle(posted.replies)
    secret = attachment_add(session=session, owner=alice, thread=alice_thread,
                            name="revenue secret.txt", data=b"x")  # fmt: skip
    message_post(thread=alice_thread, author=alice, text="/whisper @assistant only you",
                 attachments=[secret])  # fmt: skip
    (hit,) = search_session(session=session, user=bob, query="revenue chart")
    assert hit.message.text == "what do you see?"
    assert "📎 Q3 <mark>revenue</mark>-<mark>chart</mark>.csv" in hit.snippet
    # Another person's whisper is not found by its attachment's name either.
    assert len(search_session(session=session, user=alice, query="revenue")) == 2
    assert len(search_session(session=session, user=bob, query="revenue")) == 1


def test_on_postgresql_the_search_looks_words_up_in_an_index(db):
    from django.db import connection, transaction

    from apps.chat.search import full_text_matches

    with connection.cursor() as cursor:
        if connection.vendor != "postgresql":  # SQLite searches by a scan: no index is made
            cursor.execute("SELECT name FROM sqlite_master WHERE type = 'index'")
            assert "chat_message_search_simple" not in {row[0] for row in cursor.fetchall()}
            return
    with transaction.atomic(), connection.cursor() as cursor:
        # A tiny table is read whole; without that option, only an index that matches the
        # query's expression exactly can answer it.
        cursor.execute("SET LOCAL enable_seqscan = off")
        plan = full_text_matches(Message.objects.all(), ["harb", "gulls"]).explain()
    assert "chat_message_search_simple" in plan, plan


def test_the_search_view_is_scoped_to_the_owner(client, alice_thread, bob):
    reply(alice_thread, text="Lighthouse keeper")
    url = reverse("chat:session_search", kwargs={"session": alice_thread.session.public_id})
    client.force_login(bob)
    assert client.get(url, {"q": "lighthouse"}).status_code == 404
    client.force_login(alice_thread.session.owner)
    html = client.get(url, {"q": "lighthouse"}).content.decode()
    assert "<mark>Lighthouse</mark> keeper" in html and "?at=" in html


def test_search_across_every_session_groups_hits_and_shows_plain_text(client, alice, bob):
    from apps.chat.records.sessions import session_create

    film = session_create(owner=alice, name="Harbour film")
    shop = session_create(owner=alice, name="Shop redesign")
    reply(film.active_thread, text="**The lighthouse** at dawn:\n```python\nlight = 1\n```")
    reply(shop.active_thread, text="A [lighthouse logo](https://example.com/l.png) for _the_ shop")
    reply(session_create(owner=bob, name="Bob's").active_thread, text="lighthouse secrets")
    client.force_login(alice)
    html = client.get(reverse("chat:search"), {"q": "lighthouse"}).content.decode()
    assert "2 matches" in html and "in your sessions" in html
    assert 'aria-label="Matches in Harbour film"' in html
    assert 'aria-label="Matches in Shop redesign"' in html
    assert "secrets" not in html  # Bob's session is not searched
    # Snippets are what a reader sees: no Markdown marks, the words marked.
    assert "The <mark>lighthouse</mark> at dawn: light = 1" in html
    assert "A <mark>lighthouse</mark> logo for the shop" in html
    for mark in ("**", "```", "](", "_the_"):
        assert mark not in html.split('id="search-results"')[1]
    page = client.get(reverse("chat:session_list")).content.decode()
    assert 'placeholder="Search all your sessions"' in page
    assert (
        "Nothing in your sessions matches"
        in client.get(reverse("chat:search"), {"q": "zebra"}).content.decode()
    )


def test_a_thread_opens_at_a_message_deep_inside_and_loads_later_ones(alice_thread, client):
    messages = thread_fill(alice_thread, 2_000)
    target = messages[299]  # seq 300
    client.force_login(alice_thread.session.owner)
    url = reverse("chat:thread_detail", kwargs={"thread": alice_thread.public_id})
    html = client.get(url, {"at": str(target.public_id)}).content.decode()
    shown = seqs_in(html)
    assert shown == list(range(300 - PAGE_SIZE // 2 + 1, 300 + PAGE_SIZE // 2 + 1))
    assert 'id="earlier"' in html and "/later/?after=" in html
    assert 'data-latest-seq="2000"' in html
    later = client.get(
        reverse("chat:thread_later", kwargs={"thread": alice_thread.public_id}),
        {"after": str(messages[349].public_id)},
    ).content.decode()
    assert seqs_in(later) == list(range(351, 351 + PAGE_SIZE))
    assert f"after={messages[449].public_id}" in later
    # A message near the end opens the latest page; a wrong id opens it too.
    for at in (str(messages[-3].public_id), "nonsense"):
        html = client.get(url, {"at": at}).content.decode()
        assert seqs_in(html)[-1] == 2_000 and "/later/" not in html


def test_the_html_export_is_one_self_contained_page(client, alice_thread, roles):
    reply(alice_thread, text="**Bold** idea <script>alert(1)</script>\n\n```py\nx = 1\n```")
    client.force_login(alice_thread.session.owner)
    url = reverse("chat:thread_export", kwargs={"thread": alice_thread.public_id})
    response = client.get(url, {"format": "html"})
    assert response["Content-Type"].startswith("text/html")
    assert response["Content-Disposition"].startswith("attachment;")
    assert response["Content-Disposition"].endswith(".html")  # filename*=UTF-8''….html
    html = response.content.decode()
    assert "<strong>Bold</strong>" in html and "<script>" not in html
    assert "&lt;script&gt;" in html and "Director" in html
    director = next(role for role in roles if role.handle == "director")
    assert f"--accent: {director.colour}" in html
    assert "<link" not in html and "src=" not in html  # nothing to fetch: it opens offline
    assert client.get(url, {"format": "pdf"}).status_code == 400


def test_a_message_source_is_its_markdown_for_its_owner_only(client, alice_thread, bob):
    message = reply(alice_thread, text="# Title\n\n- item")
    url = reverse("chat:message_source", kwargs={"message": message.public_id})
    client.force_login(bob)
    assert client.get(url).status_code == 404
    client.force_login(alice_thread.session.owner)
    response = client.get(url)
    assert response.content.decode() == "# Title\n\n- item"
    assert response["Content-Type"].startswith("text/plain")


def test_the_counts_of_many_settled_threads_are_read_in_a_few_queries(
    alice_thread, django_assert_max_num_queries
):
    """However many threads' replies settled in the last second, their session's strip, their
    badges and their usage lines are read in the same few queries (not some per thread)."""
    from apps.chat.display.events import settled_counts_events

    price()
    threads = [alice_thread] + [thread_create(session=alice_thread.session) for _ in range(7)]
    for n, thread in enumerate(threads):
        reply(thread, input=100 * (n + 1), output=10)
    # (One is who is in the room; six are the session's and the threads' last turn, recent
    # replies and models.)
    with django_assert_max_num_queries(12):
        pushes = settled_counts_events(thread_ids=[thread.pk for thread in threads])
    html = "".join(event["html"] for _, event in pushes)
    assert html.count('id="thread-usage"') == len(threads)
    for thread in threads:
        assert f'id="unread-{thread.public_id}"' in html
    # Each thread's line shows its own figures; the strip shows the session's.
    lines = [event["html"] for group, event in pushes if 'id="thread-usage"' in event["html"]]
    assert any("1 reply" in line for line in lines)
    assert "<dt>Tokens in / out</dt><dd>3600 / 80</dd>" in html  # 100 + 200 + … + 800 in


@pytest.mark.django_db(transaction=True)
def test_the_usage_line_shows_the_last_turn_recent_replies_and_a_switch_of_model(
    alice, alice_thread, emulated_anthropic, emulator, celery_worker, fast_demo, client
):
    from apps.chat.council.posting import message_post
    from apps.chat.records.sessions import session_set_provider
    from apps.chat.usage import session_figures, threads_figures
    from tests.conftest import wait_settled

    wait_settled(message_post(thread=alice_thread, author=alice, text="@all first").replies)
    session_set_provider(
        session=alice_thread.session, credential=emulated_anthropic, model="claude-haiku-4-5"
    )
    last = message_post(thread=alice_thread, author=alice, text="@director @editorial_architect 2")
    wait_settled(last.replies)

    figures = threads_figures(thread_ids=[alice_thread.pk])[alice_thread.pk]
    assert [(run.provider, run.model) for run in figures.models] == [
        ("demo", "demo-1"),
        ("anthropic", "claude-haiku-4-5"),
    ]
    assert figures.switched and figures.models[0].replies == 6
    assert figures.last_turn.replies == 2  # the latest turn's replies, all of them
    assert figures.last_turn.output_tokens == sum(
        r.usage["output"] for r in wait_settled(last.replies)
    )
    assert figures.recent.replies == 8  # fewer than the window: every reply so far
    window = threads_figures(thread_ids=[alice_thread.pk], count=3)[alice_thread.pk].recent
    # The three most recently settled replies — the last turn's two and the latest before
    # them — not any three.
    settled = Message.objects.filter(thread=alice_thread, finished_at__isnull=False)
    newest = list(settled.exclude(speaker="user").order_by("-finished_at", "-pk")[:3])
    assert {r.pk for r in last.replies} < {r.pk for r in newest}
    assert window.replies == 3
    assert window.output_tokens == sum(r.usage["output"] for r in newest)
    turn, recent = session_figures(session=alice_thread.session)
    assert (turn.replies, recent.replies) == (2, 8)

    client.force_login(alice)
    page = client.get(f"/t/{alice_thread.public_id}/").content.decode()
    line = page[
        page.index('id="thread-usage"') : page.index("</dl>", page.index('id="thread-usage"'))
    ]
    assert "Models, in turn" in line and "demo · demo-1" in line
    assert line.index("demo · demo-1") < line.index("anthropic · claude-haiku-4-5")
    assert "Last turn</dt><dd>2 replies" in line and "Last 8 replies" in line
