"""Every URL with alice (the owner), bob and charlie (others): the owner works, the others get
404 and change nothing; CSRF is enforced on every POST."""

from __future__ import annotations

import json

import pytest
from django.test import Client
from django.urls import reverse

from apps.chat.council.posting import message_post
from apps.chat.models import Attachment, Message, MessageStatus, QueuedMessage, Session, Thread
from apps.chat.records.attachments import attachment_add, attachments_send
from apps.chat.records.sessions import session_workspace
from apps.connectors.models import McpServer
from apps.providers.services import credential_save
from tests.attachments.test_sniff import text_pdf

pytestmark = pytest.mark.django_db


@pytest.fixture
def world(alice, alice_thread, bob, charlie):
    posted = message_post(thread=alice_thread, author=alice, text="@director hello")
    Message.objects.filter(pk=posted.replies[0].pk).update(
        status=MessageStatus.DONE, content=[{"type": "text", "text": "Hi."}]
    )
    credential = credential_save(
        owner=alice, name="Mine", provider="openai_compatible",
        base_url="http://127.0.0.1:9/v1", api_key="",
    )  # fmt: skip
    Message.objects.filter(pk=posted.replies[0].pk).update(stop_reason="max_tokens")
    queued = [
        QueuedMessage.objects.create(thread=alice_thread, author=alice, text=f"later {n}")
        for n in (1, 2)
    ]
    session_workspace(alice_thread.session).write("notes.txt", b"harbour")
    server = McpServer.objects.create(owner=alice, name="mine", url="http://127.0.0.1:9/mcp")
    attachment = attachment_add(
        session=alice_thread.session, owner=alice, thread=alice_thread, name="plan.txt",
        data=b"harbour plan",
    )  # fmt: skip
    brief = attachment_add(
        session=alice_thread.session, owner=alice, thread=alice_thread, name="brief.pdf",
        data=text_pdf("The brief"),
    )  # fmt: skip
    attachments_send(message=posted.user_message, attachments=[attachment, brief])
    return {
        "attachment": attachment.public_id,
        "pdf": brief.public_id,
        "queued": [q.public_id for q in queued],
        "server": server.public_id,
        "thread": alice_thread.public_id,
        "session": alice_thread.session.public_id,
        "user_message": posted.user_message.public_id,
        "reply": posted.replies[0].public_id,
        "credential": credential.public_id,
    }


def urls(w) -> list[tuple[str, str, dict, set[int]]]:
    """(method, url, data, statuses the owner may get)."""
    t, s, m, r, c = w["thread"], w["session"], w["user_message"], w["reply"], w["credential"]
    q1, q2 = w["queued"]
    files = {"session": s}
    return [
        ("get", reverse("chat:files_panel", kwargs=files), {}, {200}),
        ("get", reverse("chat:files_download", kwargs=files) + "?path=notes.txt", {}, {200}),
        ("post", reverse("chat:files_upload", kwargs=files), {}, {422}),
        ("post", reverse("chat:files_delete", kwargs=files), {"path": "notes.txt"}, {200}),
        ("post", reverse("chat:attachments_upload", kwargs={"thread": t}), {}, {422}),
        ("post", reverse("chat:attachments_from_files", kwargs={"thread": t}), {}, {422}),
        (
            "post",
            reverse("chat:attachment_save", kwargs={"attachment": w["attachment"]}),
            {},
            {200},
        ),
        ("get", reverse("chat:attachment_file", kwargs={"attachment": w["attachment"]}), {}, {200}),
        ("get", reverse("chat:attachment_preview", kwargs={"attachment": w["pdf"]}), {}, {200}),
        (
            "post",
            reverse("chat:attachment_remove", kwargs={"attachment": w["attachment"]}),
            {},
            {422},
        ),  # sent: it stays with its message
        ("post", reverse("chat:message_continue", kwargs={"message": r}), {}, {204}),
        ("post", reverse("chat:message_new_chat", kwargs={"message": m}), {}, {200}),
        ("post", reverse("chat:message_unroute", kwargs={"message": m}), {}, {409}),
        ("post", reverse("chat:queued_edit", kwargs={"queued": q1}), {"text": "edited"}, {204}),
        ("post", reverse("chat:queued_cancel", kwargs={"queued": q2}), {}, {204}),
        ("post", reverse("chat:queued_send_now", kwargs={"queued": q1}), {}, {204}),
        ("post", reverse("connectors:server_test", kwargs={"server": w["server"]}), {}, {200}),
        ("post", reverse("connectors:server_delete", kwargs={"server": w["server"]}), {}, {302}),
        ("get", reverse("chat:thread_detail", kwargs={"thread": t}), {}, {200}),
        ("get", reverse("chat:session_detail", kwargs={"session": s}), {}, {302}),
        ("get", reverse("chat:session_settings", kwargs={"session": s}), {}, {200}),
        ("get", reverse("chat:thread_export", kwargs={"thread": t}) + "?format=md", {}, {200}),
        ("get", reverse("chat:thread_export", kwargs={"thread": t}) + "?format=json", {}, {200}),
        ("get", reverse("chat:thread_export", kwargs={"thread": t}) + "?format=html", {}, {200}),
        ("get", reverse("chat:thread_share", kwargs={"thread": t}), {}, {200}),
        (
            "post",
            reverse("chat:thread_share", kwargs={"thread": t}),
            {"up_to": "live", "expires": "7"},
            {200},
        ),
        ("get", reverse("chat:session_search", kwargs={"session": s}) + "?q=hello", {}, {200}),
        ("get", reverse("chat:thread_later", kwargs={"thread": t}) + f"?after={m}", {}, {200}),
        ("get", reverse("chat:message_source", kwargs={"message": r}), {}, {200}),
        ("post", reverse("chat:thread_seen", kwargs={"thread": t}), {"seq": "1"}, {204}),
        ("get", reverse("providers:credential_edit", kwargs={"credential": c}), {}, {200}),
        ("get", reverse("providers:credential_models") + f"?credential={c}", {}, {200}),
        ("post", reverse("chat:message_create", kwargs={"thread": t}), {"text": "hi"}, {200}),
        ("post", reverse("chat:thread_rename", kwargs={"thread": t}), {"label": "New"}, {200}),
        ("post", reverse("chat:message_rerun", kwargs={"message": r}), {}, {204}),
        ("post", reverse("chat:thread_interrupt", kwargs={"thread": t}), {}, {200}),
        ("post", reverse("chat:message_branch", kwargs={"message": r}), {}, {200}),
        ("post", reverse("chat:message_edit", kwargs={"message": m}), {"text": "again"}, {200}),
        ("post", reverse("chat:session_settings", kwargs={"session": s}), {}, {422}),
        ("post", reverse("chat:thread_create", kwargs={"session": s}), {}, {200}),
        ("post", reverse("chat:session_rename", kwargs={"session": s}), {"name": "X"}, {302}),
        ("post", reverse("chat:session_rename", kwargs={"session": s}), {"name": " "}, {422}),
        ("post", reverse("chat:thread_rename", kwargs={"thread": t}), {"label": "x" * 121}, {422}),
        (
            "get",
            reverse("chat:context_history", kwargs={"session": s, "kind": "memory"}),
            {},
            {200},
        ),
        (
            "post",
            reverse("chat:context_restore", kwargs={"session": s, "kind": "memory", "number": 1}),
            {},
            {409},
        ),
        ("post", reverse("chat:thread_use_latest", kwargs={"thread": t}), {}, {200}),
        ("post", reverse("chat:thread_clear", kwargs={"thread": t}), {}, {200}),
        ("post", reverse("providers:credential_test", kwargs={"credential": c}), {}, {200}),
        ("post", reverse("providers:credential_delete", kwargs={"credential": c}), {}, {302}),
        ("post", reverse("chat:session_delete", kwargs={"session": s}), {}, {200}),
    ]


def client_for(user, *, csrf=False) -> Client:
    client = Client(enforce_csrf_checks=csrf)
    client.force_login(user)
    return client


def snapshot():
    return (
        list(Attachment.objects.order_by("pk").values_list("pk", "message_id")),
        list(QueuedMessage.objects.order_by("pk").values_list("pk", "text")),
        list(McpServer.objects.order_by("pk").values_list("pk", "name", "last_error")),
        list(Message.objects.order_by("pk").values_list("pk", "status", "content")),
        list(Thread.objects.order_by("pk").values_list("pk", "label")),
        list(Session.objects.order_by("pk").values_list("pk", "name")),
    )


@pytest.mark.parametrize("stranger", ["bob", "charlie"])
def test_others_get_404_everywhere_and_change_nothing(world, stranger, request):
    client = client_for(request.getfixturevalue(stranger))
    before = snapshot()
    for method, url, data, _ in urls(world):
        response = getattr(client, method)(url, data, HTTP_HX_REQUEST="true")
        assert response.status_code == 404, (stranger, method, url, response.status_code)
    assert snapshot() == before


def test_the_owner_can_use_every_url(world, alice):
    client = client_for(alice)
    for method, url, data, expected in urls(world):
        response = getattr(client, method)(url, data, HTTP_HX_REQUEST="true")
        assert response.status_code in expected, (method, url, response.status_code)


def test_csrf_is_enforced_on_every_post(world, alice):
    client = client_for(alice, csrf=True)
    before = snapshot()
    for method, url, data, _ in urls(world):
        if method == "post":
            assert client.post(url, data).status_code == 403, url
    assert snapshot() == before


def test_anonymous_visitors_are_sent_to_log_in(world):
    client = Client()
    for method, url, data, _ in urls(world):
        response = getattr(client, method)(url, data)
        assert response.status_code == 302 and "/login/" in response["Location"], url


def test_exports_hold_the_transcript_and_no_secret(world, alice):
    client = client_for(alice)
    url = reverse("chat:thread_export", kwargs={"thread": world["thread"]})
    markdown = client.get(url + "?format=md")
    assert markdown["Content-Disposition"].startswith("attachment;")
    text = markdown.content.decode()
    assert "## You" in text and "@director hello" in text and "## Director" in text
    data = json.loads(client.get(url + "?format=json").content)
    assert [m["speaker"] for m in data["messages"]] == ["user", "director"]
    assert client.get(url + "?format=pdf").status_code == 400
