"""Attachments go with the message to every role, as each role's model reads them (issue 35,
items 3 and 5): the image and the PDF on the wire for a model that reads them, a stand-in in
words for one that does not, through the queue too."""

from __future__ import annotations

import base64

import pytest
from django.test import Client
from django.urls import reverse

from apps.chat.council.posting import message_post
from apps.chat.models import Attachment, Message
from apps.chat.records.attachments import attachment_add
from apps.chat.records.sessions import session_set_provider
from apps.providers.emulator import Script
from apps.providers.services import credential_save
from tests.attachments.test_sniff import image_bytes, text_pdf
from tests.conftest import wait_settled, wait_until

pytestmark = pytest.mark.django_db(transaction=True)


def attach(thread, owner, name, data) -> Attachment:
    return attachment_add(session=thread.session, owner=owner, thread=thread, name=name, data=data)


def test_a_model_that_reads_them_gets_the_image_and_the_pdf_where_the_message_stands(
    alice, anthropic_thread, emulator, celery_worker
):
    photo = attach(anthropic_thread, alice, "chart.png", image_bytes("PNG", size=(40, 30)))
    report = attach(anthropic_thread, alice, "report.pdf", text_pdf("Revenue rose"))
    emulator.script(Script(text="Both agree.", provider="anthropic"))
    client = Client()
    client.force_login(alice)
    response = client.post(
        reverse("chat:message_create", args=[anthropic_thread.public_id]),
        {"text": "@assistant compare them",
         "attachments": [str(photo.public_id), str(report.public_id)]},
        HTTP_HX_REQUEST="true",
    )  # fmt: skip
    assert response.status_code == 200
    sent = Message.objects.get(thread=anthropic_thread, speaker="user")
    assert [a.name for a in sent.attachments.order_by("position")] == ["chart.png", "report.pdf"]
    (reply,) = wait_settled(
        list(Message.objects.filter(thread=anthropic_thread, speaker="assistant"))
    )
    assert reply.text == "Both agree."
    # The reply's Details say what it was sent, beside its cache figures.
    from apps.chat.display.bubbles import render_bubbles

    details = str(render_bubbles([Message.objects.get(pk=reply.pk)]))
    assert "attachments sent: 1 image, 1 PDF (" in details and "in the cached prefix" in details
    blocks = emulator.requests[-1].body["messages"][0]["content"]
    kinds = [block["type"] for block in blocks]
    assert kinds == ["text", "text", "image", "text", "document"]
    assert blocks[1]["text"] == "[image 1 of this message: chart.png]"
    with photo.file.open("rb") as stored:
        assert base64.b64decode(blocks[2]["source"]["data"]) == stored.read()


def test_a_model_that_cannot_read_them_gets_words_instead_never_an_error(
    alice, alice_thread, emulator, celery_worker
):
    local = credential_save(
        owner=alice, name="Laptop", provider="ollama", base_url=emulator.url + "/v1"
    )
    session_set_provider(session=alice_thread.session, credential=local, model="llama3.1:8b")
    photo = attach(alice_thread, alice, "cat.jpg", image_bytes("JPEG", size=(64, 48)))
    report = attach(alice_thread, alice, "memo.pdf", text_pdf("Ship on Friday"))
    notes = attach(alice_thread, alice, "notes.md", b"# Plan\nbuy milk\n")
    emulator.script(Script(text="Noted.", provider="openai"))
    posted = message_post(
        thread=alice_thread, author=alice, text="@assistant what do you make of these?",
        attachments=[photo, report, notes],
    )  # fmt: skip
    (reply,) = wait_settled(posted.replies)
    assert reply.status == "done"
    (user,) = [m for m in emulator.requests[-1].body["messages"] if m["role"] == "user"][:1]
    said = user["content"] if isinstance(user["content"], str) else str(user["content"])
    assert "image_url" not in said and "file_data" not in said
    # No model that sees is set up: the pixels speak, and say that is all they are.
    assert (
        "[image 1 of this message: cat.jpg, an image (64x48 pixels) you cannot see; a "
        "description of it: a wide " in said
    )
    assert Attachment.objects.get(pk=photo.pk).described_by.startswith("Parley, from the pixels")
    assert "[PDF 1 of this message: memo.pdf, a PDF of 1 pages; its text:" in said
    assert "Ship on Friday" in said and "buy milk" in said
    assert "Ship on Friday" in Attachment.objects.get(pk=report.pk).stand_in  # read once, kept


def test_an_image_is_described_once_by_a_model_that_sees_for_every_model_that_cannot(
    alice, alice_thread, emulator, emulated_anthropic, celery_worker
):
    """The session's own model reads text only; the director's credential (Anthropic) sees:
    its cheap model writes the description once, and both text-only roles of an `@all` turn
    and the next turn read that same text."""
    from apps.chat.models import SessionRole

    local = credential_save(
        owner=alice, name="Laptop", provider="ollama", base_url=emulator.url + "/v1"
    )
    session = alice_thread.session
    session_set_provider(session=session, credential=local, model="llama3.1:8b")
    SessionRole.objects.filter(session=session, role__handle="director").update(
        credential=emulated_anthropic, model_override="claude-sonnet-5"
    )
    photo = attach(alice_thread, alice, "chart.png", image_bytes("PNG", size=(80, 40)))
    twin = attach(alice_thread, alice, "chart copy.png", image_bytes("PNG", size=(80, 40)))
    described = "A bar chart: revenue rises from 3 to 9 over four quarters."
    emulator.script(
        Script(text=described, provider="anthropic", match="Describe this image"),
        *(Script(text="Seen.", provider="openai") for _ in range(8)),
        Script(text="Seen.", provider="anthropic"),
    )  # fmt: skip
    posted = message_post(thread=alice_thread, author=alice, text="@all what does it show?",
                          attachments=[photo])  # fmt: skip
    wait_settled(posted.replies)
    describing = [r for r in emulator.requests if "Describe this image" in str(r.body)]
    assert len(describing) == 1  # once, however many roles needed it
    assert describing[0].body["model"] == "claude-haiku-4-5"  # the cheap model that sees
    (image,) = [b for b in describing[0].body["messages"][0]["content"] if b["type"] == "image"]
    with photo.file.open("rb") as stored:
        assert base64.b64decode(image["source"]["data"]) == stored.read()
    stored_photo = Attachment.objects.get(pk=photo.pk)
    assert (stored_photo.stand_in, stored_photo.described_by) == (
        described,
        "Anthropic · claude-haiku-4-5",
    )
    assert Attachment.objects.get(pk=twin.pk).stand_in == described  # the same bytes
    text_only = [r for r in emulator.requests if r.provider == "openai"]
    assert text_only and all(described in str(r.body) for r in text_only)
    director = [r for r in emulator.requests if r.provider == "anthropic" and r not in describing]
    assert director and all(b"image" in str(r.body).encode() for r in director)  # it sees
    note = {"event": "described", "detail": "1 image described by Anthropic · claude-haiku-4-5"}

    def notes(reply) -> list[dict]:
        reply.refresh_from_db()
        return [{k: e.get(k) for k in note} for e in reply.log if e.get("event") == "described"]

    # Every text-only reply's Details say so, whether it asked for the words or found them
    # written by another; the director, which sees, says nothing of it.
    for reply in posted.replies:
        assert notes(reply) == ([note] if reply.provider == "ollama" else [])
    # The next turn reads the kept description: nothing is described again.
    emulator.script(Script(text="Still seen.", provider="openai"))
    again = message_post(thread=alice_thread, author=alice, text="@assistant and now?")
    wait_settled(again.replies)
    assert len([r for r in emulator.requests if "Describe this image" in str(r.body)]) == 1
    assert described in str(emulator.requests[-1].body)
    assert notes(again.replies[0]) == [note]


def test_a_message_queued_behind_a_turn_keeps_its_attachments(
    alice, anthropic_thread, emulator, celery_worker
):
    emulator.script(
        Script(text="A slow first answer. " * 5, tokens_per_second=40, provider="anthropic"),
        Script(text="Seen it.", provider="anthropic"),
    )
    first = message_post(thread=anthropic_thread, author=alice, text="@assistant hello")
    wait_until(lambda: emulator.requests)
    photo = attach(anthropic_thread, alice, "later.png", image_bytes("PNG", size=(12, 12)))
    posted = message_post(
        thread=anthropic_thread, author=alice, text="@assistant and this?", attachments=[photo]
    )
    assert posted.queued is not None
    assert list(posted.queued.attachments.all()) == [Attachment.objects.get(pk=photo.pk)]
    wait_settled(first.replies)
    wait_until(lambda: len(emulator.requests) == 2, timeout=30)
    last = emulator.requests[-1].body["messages"]
    assert any(
        block.get("type") == "image" for entry in last for block in entry["content"]
        if isinstance(block, dict)
    )  # fmt: skip
    sent = Attachment.objects.get(pk=photo.pk)
    assert sent.message is not None and sent.queued is None


def test_an_attachment_that_is_not_yours_or_gone_keeps_the_message_box(
    alice, alice_thread, celery_worker
):
    client = Client()
    client.force_login(alice)
    url = reverse("chat:message_create", args=[alice_thread.public_id])
    response = client.post(
        url, {"text": "look", "attachments": ["not-a-uuid"]}, HTTP_HX_REQUEST="true"
    )
    assert "An attachment is no longer there" in response.content.decode()
    assert not Message.objects.filter(thread=alice_thread, speaker="user").exists()


def test_a_retry_and_a_branch_keep_the_attachments_and_clearing_the_parent_loses_none(
    alice, bob, anthropic_thread, emulator, celery_worker
):
    from apps.chat.council.replies import reply_rerun
    from apps.chat.records.rooms import member_add
    from apps.chat.records.threads import thread_branch, thread_clear_messages
    from apps.chat.selectors import transcript_page

    member_add(session=anthropic_thread.session, by=alice, username="bob")
    photo = attach(anthropic_thread, alice, "still.png", image_bytes("PNG", size=(40, 30)))
    emulator.script(*(Script(text="Seen.", provider="anthropic") for _ in range(2)))
    posted = message_post(thread=anthropic_thread, author=alice, text="@assistant look",
                          attachments=[photo])  # fmt: skip
    (reply,) = wait_settled(posted.replies)

    def sent_images() -> int:
        return str(emulator.requests[-1].body).count("'type': 'image'")

    assert sent_images() == 1
    (again,) = wait_settled([reply_rerun(message=reply, by=alice)])
    assert again.status == "done" and sent_images() == 1  # the retry sends it again
    secret = message_post(thread=anthropic_thread, author=alice,
                          text="/whisper @assistant between us")  # fmt: skip
    wait_settled(secret.replies)
    branch = thread_branch(thread=anthropic_thread, message=secret.replies[0])
    emulator.script(Script(text="Still seen.", provider="anthropic"))
    (mine,) = wait_settled(
        message_post(thread=branch, author=alice, text="@assistant and here?").replies
    )
    assert mine.status == "done" and sent_images() == 1  # the branch's history holds it
    # The parent is cleared: the branch keeps the image (the same bytes) and the whisper.
    thread_clear_messages(thread=anthropic_thread)
    copied = Message.objects.get(thread=branch, speaker="user", seq=1)
    (kept,) = copied.attachments.all()
    assert (kept.name, kept.sha256) == ("still.png", photo.sha256) and kept.file.storage.exists(
        kept.file.name)  # fmt: skip
    branch.refresh_from_db()
    page = transcript_page(thread=branch, user=bob)
    seen_by_bob = {m.text for m in page.inherited + page.own}
    assert "@assistant look" in seen_by_bob
    assert "between us" not in seen_by_bob  # the copied whisper is still a whisper
