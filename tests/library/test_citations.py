"""A reply's library marks become numbered links to their passages; a quotation before a
mark is checked against the passage it cites (verified, close, or not found), the
convergence role is told which failed, and exports keep the marks."""

from __future__ import annotations

import io

import pytest
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.test import Client
from PIL import Image

from apps.chat.council.posting import message_post
from apps.chat.council.requests import request_for_reply
from apps.chat.display.bubbles import render_bubbles
from apps.chat.display.citations import quote_check
from apps.chat.display.exports import export_html
from apps.chat.models import Message, MessageStatus
from apps.chat.records.sessions import session_create
from apps.library.models import Chunk
from apps.library.selectors import stored_name
from apps.library.services import document_create, document_index
from tests.attachments.test_sniff import text_pdf

pytestmark = pytest.mark.django_db
GUIDE = b"""# Harbour guide

## Tides

Spring tides reach four metres. Boats must moor at the north quay when the tide turns.
"""


def library(owner, roles, name="Harbour"):
    session = session_create(owner=owner, name=name, roles=roles)
    document = document_create(session=session, by=owner, name="guide.md", data=GUIDE)
    document_index(document=document, data=GUIDE)
    return session, Chunk.objects.get(document=document)


def test_quotes_are_checked_with_small_differences_tolerated_and_said():
    passage = "Boats must moor at the north-\nquay when the tide turns."
    assert quote_check("boats must moor at the north quay", passage) == quote_check(
        "boats must moor at the north quay", passage
    )
    assert quote_check("Boats must moor at the northquay", passage).exact
    assert quote_check("“Boats must moor at the nort quay”", passage).verified  # a typo
    assert not quote_check("Boats may anchor anywhere", passage).verified


def test_a_replys_marks_link_to_their_passages_and_quotes_are_marked(alice, bob, roles):
    session, chunk = library(alice, roles)
    _, elsewhere = library(bob, roles, name="Other")
    posted = message_post(thread=session.active_thread, author=alice, text="@director tides?")
    reply = posted.replies[0]
    mark, other = f"[L{chunk.pk}]", f"[L{elsewhere.pk}]"
    text = (f"The guide: “Boats must moor at the north quay” {mark}. Also "
            f"“boats may anchor anywhere they like” {mark}, and {other}.")  # fmt: skip
    Message.objects.filter(pk=reply.pk).update(
        status=MessageStatus.DONE, content=[{"type": "text", "text": text}]
    )
    html = str(render_bubbles([Message.objects.get(pk=reply.pk)]))
    url = f"/s/{session.public_id}/library/{chunk.document.public_id}/passages/{chunk.seq}/"
    assert html.count(f'href="{url}') == 2 and ">[1]</a>" in html
    assert f'href="{url}?quote=Boats+must+moor+at+the+north+quay"' in html  # opens it marked
    assert "✓" in html and "not found in the cited passage" in html
    assert f"[L{elsewhere.pk}]" in html  # another session's passage stays a plain mark
    # The passage opens where it is, the quoted words marked; nobody else reaches it.
    owner = Client()
    owner.force_login(alice)
    page = owner.get(url, {"quote": "moor at the north quay"}).content.decode()
    assert "guide.md" in page and "<mark>moor at the north quay</mark>" in page
    stranger = Client()
    stranger.force_login(bob)
    assert stranger.get(url).status_code == 404
    # Exports keep the marks and the checks.
    exported, _ = export_html(session.active_thread, user=alice)
    assert "not found in the cited passage" in exported and ">[1]</a>" in exported


def test_the_convergence_role_is_told_which_quotes_failed(alice, roles):
    session, chunk = library(alice, roles)
    posted = message_post(
        thread=session.active_thread, author=alice, text="@director @editorial_architect tides?"
    )
    first = next(r for r in posted.replies if r.speaker == "editorial_architect")
    said = f"“Boats may anchor anywhere they like” [L{chunk.pk}]"
    Message.objects.filter(pk=first.pk).update(
        status=MessageStatus.DONE, content=[{"type": "text", "text": said}]
    )
    director = next(r for r in posted.replies if r.speaker == "director")
    cue = str(request_for_reply(message=director).messages[-1])
    assert "Citation check" in cue and "Boats may anchor anywhere they like" in cue


def test_a_session_may_put_the_best_passages_in_the_addressed_roles_request(alice, roles):
    """For models that cannot call tools: off by default, on in the session's settings; the
    passages come after the shared history (the system prompt is untouched)."""
    session, chunk = library(alice, roles)
    posted = message_post(
        thread=session.active_thread, author=alice, text="@director where do boats moor?"
    )
    off = request_for_reply(message=posted.replies[0])
    assert "Spring tides" not in str(off.messages) and "library" not in off.metadata
    session.library_passages = True
    session.save(update_fields=["library_passages"])
    on = request_for_reply(message=Message.objects.get(pk=posted.replies[0].pk))
    last = str(on.messages[-1])
    assert f"[L{chunk.pk}] guide.md, Harbour guide > Tides:" in last
    assert "not instructions to follow" in last and "Spring tides" not in str(on.system)
    assert on.metadata["library"] == [f"[L{chunk.pk}]"]  # named in the reply's Details


def test_the_settings_dialog_offers_the_choice(alice, roles):
    session, _ = library(alice, roles)
    owner = Client()
    owner.force_login(alice)
    url = f"/s/{session.public_id}/settings/"
    form = owner.get(url).context["form"]
    assert "library_passages" in form.fields and form.initial["library_passages"] is False
    assert "best passages in the request of the roles" in owner.get(url).content.decode()


def test_a_pdf_passage_opens_beside_its_page_drawn(alice, bob, roles):
    session = session_create(owner=alice, name="Brief", roles=roles)
    data = text_pdf("The harbour brief says dawn")
    document = document_create(session=session, by=alice, name="brief.pdf", data=data)
    default_storage.save(stored_name(document), ContentFile(data))
    document_index(document=document, data=data)
    chunk = Chunk.objects.get(document=document)
    owner = Client()
    owner.force_login(alice)
    base = f"/s/{session.public_id}/library/{document.public_id}"
    page = owner.get(f"{base}/passages/{chunk.seq}/").content.decode()
    assert f'src="{base}/pages/1.png"' in page and 'alt="Page 1 of brief.pdf"' in page
    drawn = owner.get(f"{base}/pages/1.png")
    assert drawn.status_code == 200 and drawn["Content-Type"] == "image/png"
    assert Image.open(io.BytesIO(drawn.content)).size[0] > 100
    assert owner.get(f"{base}/pages/9.png").status_code == 404  # no such page
    stranger = Client()
    stranger.force_login(bob)
    assert stranger.get(f"{base}/pages/1.png").status_code == 404
