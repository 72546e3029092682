"""Bad bytes and bad input: a clear 4xx, nothing half-saved, nothing crashed, no key shown."""

from __future__ import annotations

import asyncio
import json
import logging
import re

import pytest
from channels.db import database_sync_to_async
from django.urls import reverse

from apps.chat.models import Message, MessageKind, MessageStatus, Session, Thread
from apps.chat.records.sessions import session_set_provider
from apps.providers.emulator import Script
from apps.providers.services import credential_save
from tests.chat.tabs import Tab
from tests.chat.test_live_streaming import open_tab, read_until, session_cookie
from tests.conftest import wait_settled, wait_until

KEY = "sk-test-echoed-key-1234567890abcdef"


@pytest.fixture
def echo_thread(alice, alice_thread, emulator):
    """The thread's assistant is an OpenAI-compatible upstream at the emulator."""
    credential = credential_save(
        owner=alice, name="Echo", provider="openai_compatible",
        base_url=f"{emulator.url}/v1", api_key=KEY,
    )  # fmt: skip
    session_set_provider(session=alice_thread.session, credential=credential, model="gpt-4.1")
    return alice_thread


def post_and_settle(client, thread, text: str) -> Message:
    response = client.post(
        reverse("chat:message_create", kwargs={"thread": thread.public_id}), {"text": text}
    )
    assert response.status_code in (200, 302), response.content[:500]
    (reply,) = wait_settled(
        [wait_until(lambda: Message.objects.filter(thread=thread, speaker="assistant").first())]
    )
    return reply


@pytest.mark.django_db(transaction=True)
def test_nul_and_lone_surrogates_in_model_output_are_stored_replaced(
    alice, echo_thread, emulator, celery_worker, client
):
    emulator.script(Script(text="before\x00middle\ud800after", provider="openai"))
    client.force_login(alice)
    reply = post_and_settle(client, echo_thread, "@assistant say something odd")
    assert reply.status == MessageStatus.DONE, reply.error
    assert reply.text == "before\ufffdmiddle\ufffdafter"
    assert reply.attempt == 1  # one paid call, not a retry loop


@pytest.mark.django_db(transaction=True)
def test_a_provider_error_that_quotes_the_key_never_shows_it_anywhere(
    alice, echo_thread, emulator, celery_worker, client, caplog
):
    caplog.set_level(logging.INFO)
    emulator.script(
        Script(
            status=401, error_type="invalid_api_key", provider="openai",
            error_message="Incorrect API key provided: {key}. Find your key in your account.",
        )
    )  # fmt: skip
    alice.is_staff = alice.is_superuser = True
    alice.save()
    client.force_login(alice)
    reply = post_and_settle(client, echo_thread, "@assistant hello")
    assert reply.status == MessageStatus.ERROR
    assert KEY not in reply.error and "••••cdef" in reply.error
    export = reverse("chat:thread_export", kwargs={"thread": echo_thread.public_id})
    for url in (
        reverse("chat:thread_detail", kwargs={"thread": echo_thread.public_id}),
        export + "?format=md",
        export + "?format=json",
        reverse("admin:chat_message_change", args=[reply.pk]),
        reverse("admin:chat_message_changelist"),
    ):
        assert KEY not in client.get(url).content.decode(), url
    assert KEY not in caplog.text


NUL = "a\x00b"
# A lone surrogate cannot travel in a form (UTF-8 has no encoding for it); these are its
# bytes as a broken client might send them, which Django decodes to replacement characters.
LONE = "x\xed\xa0\x80y".encode("latin-1").decode("utf-8", "replace")


def hostile_http_cases(
    thread: Thread, session: Session, other_thread: Thread, message: Message, other_message
):
    """(method, url, data): each must answer below 500 and leave the data as it was."""
    t = {"thread": thread.public_id}
    s = {"session": session.public_id}
    create = reverse("chat:message_create", kwargs=t)
    cases: list[tuple[str, str, dict]] = []
    for text in (
        "",
        "   ",
        "\n\n",
        "x" * 200_001,
        "/rounds ²",
        "/rounds 99999999999999999999",
        "/rounds -1",
        "/rounds 1e3",
        "/nonsense",
        "/mute @nobody",
        "/unmute",
        "/mode",
        "/mode sideways",
        "/rename",
        f"/rename {'n' * 500}",
        "/rounds 3 4",
        "\x00",
        "\x00\x00 \x00",
        "\x00\t\x00",
    ):
        cases.append(("post", create, {"text": text}))
    settings_url = reverse("chat:session_settings", kwargs=s)
    for data in ({"thread": "not-a-uuid", "name": "Changed"}, {"thread": "'; DROP TABLE x;--"},
                 {"name": "", "thread": str(thread.public_id)}, {"name": NUL},
                 {"name": "n" * 5000}, {"model": "m" * 5000}, {"auto_rounds": "²"},
                 {"auto_rounds": "-5"}, {"auto_rounds": "1e9"}, {"credential": "not-a-uuid"},
                 {"credential": "00000000-0000-0000-0000-000000000000"}, {"roles": "nobody"},
                 {"apply": "sideways"}):  # fmt: skip
        cases.append(("post", settings_url, data))
    cases += [
        ("get", reverse("providers:credential_models") + "?credential=not-a-uuid", {}),
        ("get", reverse("providers:credential_models") + "?credential=%00", {}),
        ("get", reverse("providers:credential_models") + "?credential=" + "f" * 500, {}),
        ("get", reverse("chat:thread_earlier", kwargs=t) + "?before=nonsense", {}),
        ("get", reverse("chat:thread_earlier", kwargs=t) + "?before=", {}),
        ("get", reverse("chat:thread_earlier", kwargs=t) + f"?before={message.public_id}%00", {}),
        ("get", reverse("chat:thread_export", kwargs=t) + "?format=exe", {}),
        ("get", reverse("chat:thread_export", kwargs=t) + "?format=", {}),
        ("post", reverse("chat:thread_rename", kwargs=t), {"label": ""}),
        ("post", reverse("chat:thread_rename", kwargs=t), {"label": "l" * 1000}),
        ("post", reverse("chat:session_rename", kwargs=s), {"name": ""}),
        ("post", reverse("chat:message_edit", kwargs={"message": message.public_id}),
         {"text": ""}),
        ("post", reverse("chat:message_edit", kwargs={"message": message.public_id}),
         {"text": "y" * 200_001}),
        # Someone else's thread, session and message: 404, never theirs changed.
        ("post", reverse("chat:message_create", kwargs={"thread": other_thread.public_id}),
         {"text": "hello"}),
        ("post", reverse("chat:thread_rename", kwargs={"thread": other_thread.public_id}),
         {"label": "mine now"}),
        ("post", reverse("chat:session_rename",
                         kwargs={"session": other_thread.session.public_id}), {"name": "mine"}),
        ("get", reverse("chat:thread_detail", kwargs={"thread": other_thread.public_id}), {}),
        ("post", reverse("chat:thread_interrupt", kwargs={"thread": other_thread.public_id}), {}),
        ("post", reverse("chat:thread_clear", kwargs={"thread": other_thread.public_id}), {}),
        ("post", reverse("chat:session_delete",
                         kwargs={"session": other_thread.session.public_id}), {}),
        ("post", reverse("chat:message_branch", kwargs={"message": other_message.public_id}), {}),
        ("post", reverse("chat:message_edit", kwargs={"message": other_message.public_id}),
         {"text": "edited by someone else"}),
        ("post", reverse("chat:message_rerun", kwargs={"message": message.public_id}), {}),
        ("post", reverse("chat:message_rerun", kwargs={"message": other_message.public_id}), {}),
        ("get", reverse("chat:message_bubble", kwargs={"message": other_message.public_id}), {}),
        ("get", reverse("chat:thread_export", kwargs={"thread": other_thread.public_id})
         + "?format=json", {}),
        ("post", reverse("chat:thread_create",
                         kwargs={"session": other_thread.session.public_id}), {}),
        ("post", reverse("chat:message_create", kwargs={"thread": other_thread.public_id}),
         {"text": "/rename stolen"}),
        ("post", reverse("chat:message_create", kwargs=t), {"text": "/mute @everyone_else"}),
        ("post", reverse("chat:message_create", kwargs=t), {"text": "/rounds"}),
        ("get", reverse("chat:session_settings",
                        kwargs={"session": other_thread.session.public_id}), {}),
    ]  # fmt: skip
    return cases


def snapshot(*threads: Thread) -> list:
    return [
        list(
            Message.objects.filter(thread__in=threads).order_by("pk").values_list("pk", "content")
        ),
        list(Thread.objects.filter(pk__in=[t.pk for t in threads]).values_list("label")),
        list(Session.objects.order_by("pk").values_list("name", "model", "auto_rounds")),
    ]


@pytest.mark.django_db
def test_hostile_requests_get_a_clear_answer_and_change_nothing(
    alice, bob, alice_thread, client, roles
):
    from apps.chat.council.posting import message_post
    from apps.chat.records.sessions import session_create

    posted = message_post(thread=alice_thread, author=alice, text="a first message")
    Message.objects.filter(thread=alice_thread).exclude(pk=posted.user_message.pk).delete()
    bobs = session_create(owner=bob, name="Bob's").active_thread
    bobs_message = message_post(thread=bobs, author=bob, text="bob's own").user_message
    Message.objects.filter(thread=bobs).exclude(pk=bobs_message.pk).delete()
    client.force_login(alice)
    before = snapshot(alice_thread, bobs)
    cases = hostile_http_cases(
        alice_thread, alice_thread.session, bobs, posted.user_message, bobs_message
    )
    assert len(cases) >= 60
    answers = {}
    for method, url, data in cases:
        response = getattr(client, method)(url, data)
        answers[(url, json.dumps(data)[:60])] = response.status_code
        assert response.status_code < 500, (url, data, response.status_code)
    assert snapshot(alice_thread, bobs) == before, "a hostile request changed something"
    assert all(code >= 400 or code == 200 for code in answers.values())


@pytest.mark.django_db
def test_unstorable_characters_in_names_are_replaced_not_a_server_error(alice_thread, client):
    client.force_login(alice_thread.session.owner)
    t, s = {"thread": alice_thread.public_id}, {"session": alice_thread.session.public_id}
    for url, field, value in (
        (reverse("chat:thread_rename", kwargs=t), "label", NUL),
        (reverse("chat:session_rename", kwargs=s), "name", NUL),
        (reverse("chat:message_create", kwargs=t), "text", f"/rename {NUL}"),
        (reverse("chat:thread_rename", kwargs=t), "label", LONE),
    ):
        assert client.post(url, {field: value}).status_code < 400, url
    alice_thread.refresh_from_db()
    alice_thread.session.refresh_from_db()
    assert alice_thread.label == "x\ufffd\ufffd\ufffdy"
    assert alice_thread.session.name == "a\ufffdb"


HOSTILE_FRAMES = [
    '{"type": "sync", "pending": ["\\ud800"]}', '{"type": "sync\\udfff"}',
    " ", "null", "[]", "42", '"sync"', "{", "}" * 10, '{"type": "sync", "after_seq": Infinity}',
    '{"type": "sync", "after_seq": -Infinity}', '{"type": "sync", "after_seq": NaN}',
    '{"type": "sync", "after_seq": 1e400}', '{"type": "sync", "after_seq": "5"}',
    '{"type": "sync", "after_seq": [1]}', '{"type": "sync", "after_seq": 99999999999999999999}',
    '{"type": "sync", "pending": 5}', '{"type": "sync", "pending": "abc"}',
    '{"type": "sync", "pending": {"a": 1}}', '{"type": "sync", "pending": [null, 1, {}]}',
    '{"type": "sync", "pending": ["' + "f" * 10_000 + '"]}', "[" * 100_000 + "]" * 100_000,
    '{"a":' * 50_000 + "1" + "}" * 50_000, '{"type": "delete_everything"}',
    '{"type": "sync", "after_seq": true}', "\x00", '{"type": "sync\\u0000"}',
]  # fmt: skip


@pytest.mark.django_db(transaction=True)
async def test_hostile_websocket_frames_are_ignored_and_the_tab_keeps_working(alice, alice_thread):
    cookie = await database_sync_to_async(session_cookie)(alice)
    communicator = await open_tab(cookie, alice_thread)
    tab = Tab()
    await read_until(communicator, tab, lambda: tab.synced)
    for frame in HOSTILE_FRAMES:
        await communicator.send_to(text_data=frame)
    # 300 sync frames at once render one snapshot, not 300.
    tab.frames.clear()
    for _ in range(300):
        await communicator.send_to(text_data='{"type": "sync", "after_seq": 0}')
    syncs = sum('id="sync-state"' in frame for frame in await drain(communicator))
    assert syncs <= 2  # at most one for the hostile syncs, one for the 300
    # The consumer is alive: a fresh sync is answered once the sync rate limit's window
    # (SYNC_MIN_INTERVAL_SECONDS, a clock by design) has passed.
    await asyncio.sleep(1.1)
    await communicator.send_to(text_data='{"type": "sync", "after_seq": 0}')
    fresh = Tab()
    await read_until(communicator, fresh, lambda: fresh.synced)
    await communicator.disconnect()


async def drain(communicator) -> list[str]:
    frames = []
    while not await communicator.receive_nothing(timeout=0.5):
        frames.append((await communicator.receive_output())["text"])
    return frames


@pytest.mark.django_db
def test_the_same_composer_form_sent_twice_posts_one_message(alice, alice_thread, client):
    client.force_login(alice)
    url = reverse("chat:message_create", kwargs={"thread": alice_thread.public_id})
    page = client.get(reverse("chat:thread_detail", kwargs={"thread": alice_thread.public_id}))
    token = re.search(r'name="client_token" value="([0-9a-f-]{36})"', page.content.decode())[1]
    sent = {"text": "only once, please", "client_token": token}
    first = client.post(url, sent, headers={"HX-Request": "true"})
    second = client.post(url, sent, headers={"HX-Request": "true"})
    assert first.status_code == second.status_code == 200
    assert Message.objects.filter(thread=alice_thread, speaker="user").count() == 1
    replies = Message.objects.filter(thread=alice_thread, kind=MessageKind.CHAT).exclude(
        speaker="user"
    )
    assert replies.count() == 1  # one set of replies
    # The composer that comes back carries a new token: the next message is a new one.
    assert token not in first.content.decode()
