"""Attachments through the token API (issue 35, item 5, in part): a message that names waiting
attachments sends them; the message lists them; the bytes come back under the room's rules."""

from __future__ import annotations

import pytest
from django.test import Client

from apps.api.tokens import token_create
from apps.chat.models import Message
from apps.chat.records.attachments import attachment_add
from apps.chat.records.rooms import member_add
from tests.api.test_api import bearer, post
from tests.attachments.test_sniff import image_bytes, text_pdf

pytestmark = pytest.mark.django_db


@pytest.fixture
def poster(alice):
    return token_create(user=alice, name="laptop", scope="post")[1]


def waiting(thread, owner, name, data):
    return attachment_add(session=thread.session, owner=owner, thread=thread, name=name, data=data)


def test_a_message_that_names_waiting_attachments_sends_them(alice, alice_thread, poster):
    image = waiting(alice_thread, alice, "chart.png", image_bytes("PNG", size=(30, 20)))
    pdf = waiting(alice_thread, alice, "report.pdf", text_pdf("Numbers"))
    url = f"/api/v1/threads/{alice_thread.public_id}/messages"
    ids = [str(image.public_id), str(pdf.public_id)]
    sent = post(url, poster, {"text": "@assistant look", "attachments": ids})
    assert sent.status_code == 201, sent.content
    listed = sent.json()["message"]["attachments"]
    assert [(a["name"], a["kind"], a["width"], a["pages"]) for a in listed] == [
        ("chart.png", "image", 30, None), ("report.pdf", "pdf", None, 1)
    ]  # fmt: skip
    assert Message.objects.get(thread=alice_thread, speaker="user").attachments.count() == 2
    again = post(url, poster, {"text": "@assistant again", "attachments": [ids[0]]})
    assert again.status_code == 404 and again.json()["field"] == "attachments"  # sent already
    fetched = Client().get(f"/api/v1/attachments/{image.public_id}", **bearer(poster))
    assert fetched.status_code == 200 and fetched["Content-Type"] == "image/png"
    assert fetched["X-Content-Type-Options"] == "nosniff"


def test_someone_elses_waiting_attachment_is_a_404_and_posts_nothing(
    alice, bob, alice_thread, poster
):
    member_add(session=alice_thread.session, by=alice, username="bob")
    bobs = waiting(alice_thread, bob, "bob.txt", b"mine")
    url = f"/api/v1/threads/{alice_thread.public_id}/messages"
    refused = post(url, poster, {"text": "hi", "attachments": [str(bobs.public_id)]})
    assert refused.status_code == 404
    assert not Message.objects.filter(thread=alice_thread, speaker="user").exists()
    alices = Client().get(f"/api/v1/attachments/{bobs.public_id}", **bearer(poster))
    assert alices.status_code == 404  # not sent yet: only its owner sees it
