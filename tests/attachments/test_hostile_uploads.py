"""Uploads tried as a hostile member would (issue 45, items 7 and 8): a truncated JPEG, cards
with a malformed `assets` or nested 100,000 deep, a NUL in an import's name, a file name that
tries to rename itself on download. Each answer is a sentence, never a 500, and no name
leaves its header."""

from __future__ import annotations

import json
import re

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from apps.api.tokens import token_create
from apps.attachments.headers import content_disposition
from apps.attachments.sniff import Refused, sniff
from apps.chat.council.posting import message_post
from apps.chat.records.attachments import attachment_add
from apps.imports.models import ImportJob
from tests.api.test_api import bearer, post
from tests.attachments.test_sniff import image_bytes

pytestmark = pytest.mark.django_db

INJECTED = "report\";filename*=UTF-8''pwned.html;x=\".txt"


@pytest.fixture
def poster(alice):
    return token_create(user=alice, name="laptop", scope="post")[1]


def test_the_first_300_bytes_of_a_jpeg_are_refused_in_words(alice, alice_thread, poster):
    truncated = image_bytes("JPEG", size=(200, 200))[:300]
    with pytest.raises(Refused, match="damaged image"):
        sniff(truncated, "photo.jpg")
    response = Client().post(
        f"/api/v1/threads/{alice_thread.public_id}/attachments",
        {"files": [SimpleUploadedFile("photo.jpg", truncated)]}, **bearer(poster),
    )  # fmt: skip
    assert response.status_code == 422, response.content
    assert "damaged image" in response.json()["detail"]


@pytest.mark.parametrize(
    "assets",
    ["icon", 7, None, ["icon", 3, None], [{"type": "icon", "uri": 5}], {"type": "icon"}],
)
def test_a_card_whose_assets_are_malformed_still_becomes_a_role(alice, assets):
    card = {"spec": "chara_card_v3", "spec_version": "3.0",
            "data": {"name": "Odd Assets", "description": "x", "assets": assets}}  # fmt: skip
    client = Client()
    client.force_login(alice)
    upload = SimpleUploadedFile("odd.json", json.dumps(card).encode())
    response = client.post("/roles/", {"cards": [upload]})
    assert response.status_code == 200 and "Made 1 role" in response.content.decode()


def test_a_card_nested_100000_deep_is_refused_in_words(alice):
    nested = b'{"data":' * 100_000 + b"1" + b"}" * 100_000  # 800 KB
    client = Client()
    client.force_login(alice)
    response = client.post("/roles/", {"cards": [SimpleUploadedFile("deep.json", nested)]})
    assert response.status_code == 422  # nothing made, and why
    assert "nests too deep to be a card" in response.content.decode()


def test_a_nul_in_an_imports_name_is_kept_as_text(alice, poster):
    response = post("/api/v1/imports/uploads", poster, {"name": "chat\x00gpt.json", "size": 10})
    assert response.status_code == 201, response.content
    assert ImportJob.objects.get().name == "chat\ufffdgpt.json"


def test_a_name_cannot_rename_its_download(alice, alice_thread):
    header = content_disposition(INJECTED)
    assert header.count(";") == 2  # kind; filename=…; filename*=…
    plain = re.search(r'filename="([^"]*)"', header)
    assert plain and "pwned.html" not in plain[1].split("_")[-1]
    assert header.endswith(
        "filename*=UTF-8''report%22%3Bfilename%2A%3DUTF-8%27%27pwned.html%3Bx%3D%22.txt"
    )
    assert content_disposition("a\r\nSet-Cookie: x=1\x00.txt") == (
        "attachment; filename=\"aSet-Cookie_ x=1.txt\"; filename*=UTF-8''aSet-Cookie%3A%20x%3D1.txt"
    )
    assert content_disposition("../../etc/passwd") == (
        "attachment; filename=\"....etcpasswd\"; filename*=UTF-8''....etcpasswd"
    )


def test_every_route_that_serves_a_file_names_it_with_the_one_helper(alice, alice_thread):
    """The logged-in route and the share link's route give the same, safe header."""
    attachment = attachment_add(session=alice_thread.session, owner=alice, thread=alice_thread,
                                name=INJECTED, data=b"plain text")  # fmt: skip
    message_post(thread=alice_thread, author=alice, text="the report", attachments=[attachment])
    owner = Client()
    owner.force_login(alice)
    logged_in = owner.get(f"/a/{attachment.public_id}/")
    share = owner.post(f"/t/{alice_thread.public_id}/share/", {"up_to": "live", "expires": "7"})
    (link,) = re.findall(r'>http://testserver(/shared/[^<"/]+/)</textarea>', share.content.decode())
    shared = Client().get(f"{link}a/{attachment.public_id}/")
    expected = content_disposition(attachment.name)
    assert logged_in.status_code == shared.status_code == 200
    assert logged_in["Content-Disposition"] == shared["Content-Disposition"] == expected
    assert 'filename="report' in expected and "pwned.html;" not in expected


def test_a_pdf_reading_past_its_ceiling_fails_in_words_not_in_the_process(monkeypatch):
    """The PDF's text and first page are read in a child under a memory ceiling: one that
    needs more fails that reading, with a sentence (text) or no preview (picture)."""
    from apps.attachments import bounded
    from tests.attachments.test_sniff import text_pdf

    pdf = text_pdf("Numbers")
    assert bounded.pdf_text(pdf, max_chars=1000).startswith("[page 1]\nNumbers")
    assert bounded.pdf_first_page(pdf) is not None
    monkeypatch.setattr(bounded, "MEMORY_MB", 40)  # less than the reader itself needs
    said = bounded.pdf_text(pdf, max_chars=1000)
    # Where the child runs out (its start, pypdf, the reading) decides the words after this.
    assert said.startswith("[the PDF's text could not be read: ") and said.endswith("]"), said
    assert bounded.pdf_first_page(pdf) is None
