"""Attachments through the token API (issue 35, item 5, in part): a message that names waiting
attachments sends them; the message lists them; the bytes come back under the room's rules."""

from __future__ import annotations

import pytest
from django.test import Client

from apps.api.tokens import token_create
from apps.chat.models import Attachment, Message
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


def test_files_uploaded_as_multipart_wait_for_the_message_that_names_them(
    alice, bob, alice_thread, poster
):
    from django.core.files.uploadedfile import SimpleUploadedFile

    url = f"/api/v1/threads/{alice_thread.public_id}/attachments"

    def upload(token, *files):
        return Client().post(url, {"files": list(files)}, **bearer(token))

    png = SimpleUploadedFile("chart.png", image_bytes("PNG", size=(30, 20)), "image/png")
    pdf = SimpleUploadedFile("report.pdf", text_pdf("Numbers"), "text/plain")  # a lying type
    answer = upload(poster, png, pdf)
    assert answer.status_code == 201, answer.content
    uploaded = answer.json()
    assert [(a["name"], a["media_type"]) for a in uploaded] == [
        ("chart.png", "image/png"), ("report.pdf", "application/pdf")
    ]  # fmt: skip
    ids = [a["id"] for a in uploaded]
    sent = post(f"/api/v1/threads/{alice_thread.public_id}/messages", poster,
                {"text": "@assistant look", "attachments": ids})  # fmt: skip
    assert sent.status_code == 201 and len(sent.json()["message"]["attachments"]) == 2
    # All or nothing: one refused file keeps none of them, and says why.
    good = SimpleUploadedFile("ok.txt", b"fine", "text/plain")
    svg = SimpleUploadedFile("logo.svg", b"<svg onload='x()'/>", "image/svg+xml")
    refused = upload(poster, good, svg)
    assert refused.status_code == 422 and "export it as PNG" in refused.json()["detail"]
    assert refused.json()["field"] == "files"
    assert not Attachment.objects.filter(name="ok.txt").exists()
    assert upload(poster).status_code in (400, 422)  # no file at all
    # A read token may not upload; a stranger's thread is not there.
    reader = token_create(user=alice, name="read", scope="read")[1]
    assert upload(reader, SimpleUploadedFile("a.txt", b"x")).status_code == 403
    stranger = token_create(user=bob, name="bob", scope="post")[1]
    assert upload(stranger, SimpleUploadedFile("a.txt", b"x")).status_code == 404


@pytest.mark.django_db(transaction=True)
def test_under_daphne_an_upload_body_reaches_the_api_whole_and_parsed_once(
    alice, alice_thread, asgi_server
):
    """Twisted parses no body under daphne (it would block every stream of the process on a
    big upload, and answered a multipart body without parts with a bare 400 before the API
    saw it): the API's own answers come back, in its error contract."""
    import json
    import urllib.error
    import urllib.request

    token = token_create(user=alice, name="laptop", scope="post")[1]
    url = f"{asgi_server.url}/api/v1/threads/{alice_thread.public_id}/attachments"

    def send(body: bytes, **headers) -> tuple[int, dict]:
        request = urllib.request.Request(url, data=body, method="POST", headers={
            "Content-Type": "multipart/form-data; boundary=b0", **headers})  # fmt: skip
        try:
            with urllib.request.urlopen(request, timeout=10) as answer:
                return answer.status, json.loads(answer.read())
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read())

    assert send(b"--b0--\r\n")[0] == 401  # authentication first, even for no parts
    status, answer = send(b"--b0--\r\n", Authorization=f"Bearer {token}")
    assert (status, answer["field"]) == (400, "files")
    part = (b'--b0\r\nContent-Disposition: form-data; name="files"; filename="a.md"\r\n\r\n'
            b"# Plan\r\n--b0--\r\n")  # fmt: skip
    status, answer = send(part, Authorization=f"Bearer {token}")
    assert status == 201 and answer[0]["name"] == "a.md"
