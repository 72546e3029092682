"""Attachments stored safely (issue 35, item 2): rows with the bytes in Django's storage,
de-duplicated within a session, counted in its quota, served under the room's rules."""

from __future__ import annotations

import base64
import io
import json

import pytest
from django.core.exceptions import ValidationError
from django.core.files.storage import default_storage
from django.test import Client
from django.urls import reverse
from PIL import Image

from apps.chat.models import Attachment, Message
from apps.chat.records.attachments import attachment_add, attachment_discard, attachments_send
from apps.chat.records.messages import allocate_seqs
from apps.chat.records.rooms import member_add
from apps.chat.records.sessions import session_workspace
from apps.chat.selectors import attachments_bytes
from tests.attachments.test_sniff import image_bytes, text_pdf

pytestmark = pytest.mark.django_db


def client_for(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def upload(client, thread, *files):
    url = reverse("chat:attachments_upload", args=[thread.public_id])
    uploads = []
    for name, data in files:
        handle = io.BytesIO(data)
        handle.name = name
        uploads.append(handle)
    return client.post(url, {"files": uploads})


def test_an_upload_is_sniffed_stored_once_per_session_and_answered_by_its_chip(alice, alice_thread):
    photo = image_bytes("JPEG", size=(300, 200))
    response = upload(
        client_for(alice), alice_thread, ("holiday.png", photo), ("a.pdf", text_pdf("x"))
    )
    assert response.status_code == 200
    page = response.content.decode()
    assert page.count('class="attachment-chip') == 2 and 'name="attachments"' in page
    image, pdf = Attachment.objects.order_by("pk")
    assert (image.kind, image.media_type, image.width, image.height) == (
        "image",
        "image/jpeg",
        300,
        200,
    )
    assert (image.name, image.owner, image.message) == ("holiday.png", alice, None)
    assert (pdf.kind, pdf.pages) == ("pdf", 1)
    again = attachment_add(
        session=alice_thread.session, owner=alice, thread=alice_thread, name="same.jpg", data=photo
    )
    assert again.pk != image.pk and again.file.name == image.file.name  # one stored copy
    # Each stored file once, a PDF's first-page preview counted with it.
    assert pdf.preview_size > 0
    assert attachments_bytes(session=alice_thread.session) == (
        image.size + pdf.size + pdf.preview_size
    )
    attachment_discard(attachment=again)
    assert default_storage.exists(image.file.name)  # the first still uses the bytes
    attachment_discard(attachment=image)
    assert not default_storage.exists(image.file.name)


def test_a_refused_file_says_why_and_the_others_are_kept(alice, alice_thread):
    response = upload(
        client_for(alice), alice_thread,
        ("evil.svg", b"<svg onload='alert(1)'/>"), ("notes.md", b"# Plan\n"),
    )  # fmt: skip
    assert response.status_code == 422
    page = response.content.decode()
    assert "export it as PNG" in page and 'role="alert"' in page and "notes.md" in page
    assert list(Attachment.objects.values_list("name", "media_type")) == [
        ("notes.md", "text/markdown")
    ]


def test_attachments_and_the_workspace_share_the_sessions_quota(alice, alice_thread, settings):
    settings.PARLEY_WORKSPACE_QUOTA_MB = 1
    session = alice_thread.session
    session_workspace(session).write("big.bin", b"x" * 900_000)
    big = text_pdf("y") + b"%" + b"z" * 200_000  # a PDF with trailing bytes: kept as sent
    with pytest.raises(ValidationError, match="does not fit in this session's 1 MB"):
        attachment_add(session=session, owner=alice, thread=alice_thread, name="big.pdf", data=big)
    session_workspace(session).delete("big.bin")
    kept = attachment_add(session=session, owner=alice, thread=alice_thread, name="big.pdf",
                          data=big)  # fmt: skip
    assert session_workspace(session).quota_bytes == 1024 * 1024 - len(big) - kept.preview_size


def test_the_file_is_served_with_its_sniffed_type_and_never_run(alice, alice_thread):
    png = image_bytes("PNG")
    text = b"<script>alert(1)</script>"
    shown, notes = (
        attachment_add(session=alice_thread.session, owner=alice, thread=alice_thread,
                       name=name, data=data)
        for name, data in (("shot.html", png), ("notes.txt", text))
    )  # fmt: skip
    client = client_for(alice)
    image = client.get(reverse("chat:attachment_file", args=[shown.public_id]))
    assert image["Content-Type"] == "image/png" and image["X-Content-Type-Options"] == "nosniff"
    assert image["Content-Disposition"].startswith("inline")
    Image.open(io.BytesIO(b"".join(image.streaming_content))).verify()
    download = client.get(reverse("chat:attachment_file", args=[notes.public_id]))
    assert download["Content-Type"] == "text/plain; charset=utf-8"
    assert download["Content-Disposition"] == (
        "attachment; filename=\"notes.txt\"; filename*=UTF-8''notes.txt"
    )
    assert "sandbox" in download["Content-Security-Policy"]


def test_the_room_sees_a_sent_attachment_and_a_whispers_only_its_audience(
    alice, bob, charlie, alice_thread
):
    session = alice_thread.session
    member_add(session=session, by=alice, username="bob")
    member_add(session=session, by=alice, username="charlie")
    shared, secret, waiting = (
        attachment_add(session=session, owner=alice, thread=alice_thread, name=name,
                       data=image_bytes("PNG", size=(10 + n, 10)))
        for n, name in enumerate(("shared.png", "secret.png", "waiting.png"))
    )  # fmt: skip
    public, whisper = (
        Message.objects.create(
            thread=alice_thread, seq=seq, speaker="user", author=alice, private=private,
            content=[{"type": "text", "text": "look"}],
        )
        for seq, private in zip(allocate_seqs(alice_thread, 2), (False, True), strict=True)
    )  # fmt: skip
    whisper.audience.add(alice, bob)
    attachments_send(message=public, attachments=[shared])
    attachments_send(message=whisper, attachments=[secret])

    def status(user, attachment) -> int:
        url = reverse("chat:attachment_file", args=[attachment.public_id])
        return client_for(user).get(url).status_code

    assert [status(bob, a) for a in (shared, secret, waiting)] == [200, 200, 404]
    assert [status(charlie, a) for a in (shared, secret, waiting)] == [200, 404, 404]
    assert [status(alice, a) for a in (shared, secret, waiting)] == [200, 200, 200]
    # Nobody but its owner takes a waiting attachment out, and a sent one stays.
    remove = reverse("chat:attachment_remove", args=[waiting.public_id])
    assert client_for(bob).post(remove).status_code == 404
    sent = reverse("chat:attachment_remove", args=[shared.public_id])
    assert client_for(alice).post(sent).status_code == 422
    assert client_for(alice).post(remove).status_code == 200
    assert not Attachment.objects.filter(pk=waiting.pk).exists()


def test_a_viewer_and_a_stranger_cannot_upload(alice, bob, charlie, alice_thread):
    member_add(session=alice_thread.session, by=alice, username="bob", role="viewer")
    files = ("a.txt", b"hello")
    assert upload(client_for(bob), alice_thread, files).status_code == 403
    assert upload(client_for(charlie), alice_thread, files).status_code == 404
    assert not Attachment.objects.exists()


def test_exports_name_and_link_the_attachments_a_reader_may_see(alice, bob, alice_thread):
    from apps.chat.display.exports import export_html, export_json, export_markdown

    session = alice_thread.session
    member_add(session=session, by=alice, username="bob")
    shown, secret = (
        attachment_add(session=session, owner=alice, thread=alice_thread, name=name,
                       data=image_bytes("PNG", size=(20 + n, 10)))
        for n, name in enumerate(("plan.png", "secret.png"))
    )  # fmt: skip
    public, whisper = (
        Message.objects.create(
            thread=alice_thread, seq=seq, speaker="user", author=alice, private=private,
            content=[{"type": "text", "text": text}],
        )
        for seq, private, text in zip(
            allocate_seqs(alice_thread, 2), (False, True), ("", "psst"), strict=True
        )
    )  # fmt: skip
    whisper.audience.add(alice)
    attachments_send(message=public, attachments=[shown])
    attachments_send(message=whisper, attachments=[secret])
    markdown, _ = export_markdown(alice_thread, user=bob)
    link = reverse("chat:attachment_file", args=[shown.public_id])
    assert f"- Attached: [plan.png]({link}) (image/png)" in markdown
    assert "secret.png" not in markdown and "*(no text)*" not in markdown
    data = json.loads(export_json(alice_thread, user=alice)[0])
    files = [m["attachments"] for m in data["messages"]]
    assert [[a["name"] for a in f] for f in files] == [["plan.png"], ["secret.png"]]
    assert files[0][0]["width"] == 20 and files[0][0]["url"] == link
    # The HTML export carries the picture inside it (it opens offline), for whoever may see it.
    html, _ = export_html(alice_thread, user=bob)
    with shown.file.open("rb") as stored:
        inline = base64.b64encode(stored.read()).decode()
    assert f'<img src="data:image/png;base64,{inline}" alt="plan.png">' in html
    assert "📎 plan.png" in html and "secret.png" not in html


def test_a_file_of_the_sessions_files_is_attached_and_a_sent_attachment_saved_there(
    alice, bob, alice_thread
):
    from apps.chat.council.posting import message_post

    session = alice_thread.session
    member_add(session=session, by=alice, username="bob")
    workspace = session_workspace(session)
    workspace.write("boards/frame 1.png", image_bytes("PNG", size=(50, 20)))
    url = reverse("chat:attachments_from_files", args=[alice_thread.public_id])
    picked = client_for(alice).post(url, {"path": "boards/frame 1.png"})
    assert picked.status_code == 200 and 'name="attachments"' in picked.content.decode()
    (chart,) = Attachment.objects.filter(name="frame 1.png")
    assert (chart.width, chart.owner) == (50, alice)  # sniffed and re-encoded like an upload
    for path, sentence in (("nothing.png", "There is no file"), ("../x", "not a valid path")):
        refused = client_for(alice).post(url, {"path": path})
        assert refused.status_code == 422 and sentence in refused.content.decode()
    posted = message_post(thread=alice_thread, author=alice, text="see", attachments=[chart])
    assert posted.user_message.attachments.get() == chart
    # Saved back into the files (a name taken gets a number), by anyone who may talk.
    save = reverse("chat:attachment_save", args=[chart.public_id])
    first = client_for(bob).post(save)
    assert first.content.decode().startswith(
        "Saved in the session's files as attachments/frame 1.png: everyone in the room"
    )
    assert "attachments/frame 1 (2).png:" in client_for(bob).post(save).content.decode()
    with chart.file.open("rb") as stored, workspace.open("attachments/frame 1.png") as saved:
        assert saved.read() == stored.read()
    stranger = Client()
    stranger.force_login(type(alice).objects.create_user("mallory", password="x"))
    assert stranger.post(save).status_code == 404
    assert stranger.post(url, {"path": "boards/frame 1.png"}).status_code == 404


def test_hostile_names_scripts_in_pdfs_and_a_thousand_files_are_neutralised_or_refused(
    alice, alice_thread
):
    """A name that is HTML or a path is kept as its last part and shown escaped; a PDF that
    carries JavaScript is kept (providers read it) but only ever served as a sandboxed
    download, and its first page is drawn by Parley (no script runs); a thousand files in
    one upload are refused in a sentence with nothing kept."""
    from pypdf import PdfReader, PdfWriter
    from pypdf.actions import JavaScript

    client = client_for(alice)
    named = upload(client, alice_thread, ("<img src=x onerror=alert(1)>.md", b"# hi"),
                   ("../../etc/passwd.txt", b"root"))  # fmt: skip
    html = named.content.decode()
    assert named.status_code == 200 and "<img src=x" not in html
    assert "&lt;img src=x onerror=alert(1)&gt;.md" in html
    assert set(Attachment.objects.values_list("name", flat=True)) == {
        "<img src=x onerror=alert(1)>.md", "passwd.txt"}  # fmt: skip
    # A PDF that runs JavaScript when opened.
    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(text_pdf("Open me"))))
    writer.add_open_action(JavaScript("app.alert('owned');"))
    scripted = io.BytesIO()
    writer.write(scripted)
    assert b"/JavaScript" in scripted.getvalue()
    kept = upload(client, alice_thread, ("invoice.pdf", scripted.getvalue()))
    assert kept.status_code == 200
    pdf = Attachment.objects.get(name="invoice.pdf")
    served = client.get(reverse("chat:attachment_file", args=[pdf.public_id]))
    assert served["Content-Disposition"].startswith("attachment;")
    assert "sandbox" in served["Content-Security-Policy"]
    page = client.get(reverse("chat:attachment_preview", args=[pdf.public_id]))
    assert page["Content-Type"] == "image/png" and b"".join(page.streaming_content)[:4] == (
        b"\x89PNG")  # fmt: skip
    # A thousand files at once: a sentence, nothing kept.
    before = Attachment.objects.count()
    flood = upload(client, alice_thread, *((f"n{i}.txt", b"x") for i in range(1000)))
    assert flood.status_code == 422
    assert "Attach at most 20 files at once." in flood.content.decode()
    assert Attachment.objects.count() == before
