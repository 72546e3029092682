"""Importing through the page, the API and `parley import`: the preview before anything is
written, sessions with their branches, times, models and attachments, each voice's role, a
second import of the same file making nothing, a broken conversation reported, cancelling."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from django.conf import settings
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from apps.chat.display.exports import export_json
from apps.chat.models import Attachment, Message, Session, Thread
from apps.chat.selectors import transcript_messages
from apps.imports import services, staging
from apps.imports.models import ImportedConversation, ImportJob, import_storage
from apps.ops.storage import files_under
from apps.roles.models import Role
from tests.conftest import wait_until
from tests.imports.exports import (
    PNG_1PX,
    chatgpt_trip,
    chatgpt_with_image,
    chatgpt_zip,
    claude_conversation,
    librechat_export,
    openwebui_chat,
)

pytestmark = pytest.mark.django_db(transaction=True)


def upload(client: Client, name: str, data: bytes) -> ImportJob:
    response = client.post("/account/import/", {"file": SimpleUploadedFile(name, data)})
    assert response.status_code == 302, response.content[:500]
    job = ImportJob.objects.latest("created_at")
    assert response["Location"] == f"/account/import/{job.public_id}/"
    return job


def settled(job: ImportJob, *statuses: str) -> ImportJob:
    wait_until(lambda: ImportJob.objects.get(pk=job.pk).status in statuses, timeout=30,
               message=f"the import reaching {statuses}")  # fmt: skip
    return ImportJob.objects.get(pk=job.pk)


@pytest.fixture
def alice_client(alice):
    client = Client()
    client.force_login(alice)
    return client


def test_a_chatgpt_export_is_previewed_then_imported_with_its_branches(
    alice, alice_client, celery_worker
):
    data = json.dumps([chatgpt_trip("c-1"), chatgpt_trip("c-2")]).encode()
    job = settled(upload(alice_client, "conversations.json", data), "ready")
    # The preview: what will be made, and nothing written yet.
    assert job.preview["conversations"] == 2 and job.preview["messages"] == 14
    assert job.preview["branches"] == 4
    assert job.preview["voices"] == [
        {"name": "gpt-4o", "messages": 6},
        {"name": "o3", "messages": 2},
    ]
    assert job.preview["skipped"] == [
        {"what": "tool output (code runs, searches, browsing)", "count": 2}]  # fmt: skip
    assert not Session.objects.filter(owner=alice).exists()
    page = alice_client.get(f"/account/import/{job.public_id}/").content.decode()
    assert "2</strong> sessions" in page and "4 branches" in page and "Lisbon trip" in page
    assert "A new role: gpt-4o" in page

    response = alice_client.post(f"/account/import/{job.public_id}/start/", {"role_0": "new"})
    assert response.status_code == 302
    job = settled(job, "done")
    assert job.done == 2 and job.report["made"] == len(job.report["sessions"]) == 2

    session = Session.objects.get(public_id=job.report["sessions"][0]["id"])
    assert session.owner == alice and session.name == "Lisbon trip"
    assert session.created_at == datetime.fromtimestamp(1_700_000_000, tz=UTC)
    threads = list(Thread.objects.filter(session=session).order_by("pk"))
    assert len(threads) == 3
    main, regenerated, edited = threads
    assert [(m.speaker, m.text, m.model) for m in transcript_messages(thread=main)] == [
        ("user", "Plan a trip to Lisbon", ""),
        ("gpt-4o", "Day one: Alfama.", "gpt-4o"),
        ("user", "And the weather?", ""),
        ("o3", "Mild, about 21 °C.", "o3"),
    ]
    # The regenerated answer branches after the question, the edit from nothing.
    assert [m.text for m in transcript_messages(thread=regenerated)] == [
        "Plan a trip to Lisbon", "Start in Belém."]  # fmt: skip
    assert regenerated.parent == main and regenerated.forked_from.text == "Plan a trip to Lisbon"
    assert [m.text for m in transcript_messages(thread=edited)] == [
        "Plan a trip to Porto", "Ribeira first."]  # fmt: skip
    first = Message.objects.get(thread=main, seq=1)
    assert (
        first.created_at == datetime.fromtimestamp(1_700_000_001, tz=UTC) and first.author == alice
    )
    # Each model became a role of Alice's own, offered to her alone.
    gpt, o3 = Role.objects.get(handle="gpt-4o"), Role.objects.get(handle="o3")
    assert gpt.owner == alice and o3.owner == alice and gpt.display_name == "gpt-4o"
    assert {link.role for link in session.session_roles.all()} == {gpt, o3}
    # Nothing imported shows as unread.
    listing = alice_client.get("/").content.decode()
    assert "Lisbon trip" in listing


def test_importing_the_same_file_twice_makes_nothing_twice(alice, alice_client, celery_worker):
    data = json.dumps([chatgpt_trip("c-same"), claude_conversation()]).encode()
    first = settled(upload(alice_client, "conversations.json", data), "ready")
    services.job_start(job=first, roles={})
    settled(first, "done")
    sessions, messages = Session.objects.count(), Message.objects.count()
    roles = Role.objects.count()

    again = settled(upload(alice_client, "conversations.json", data), "ready")
    assert again.preview["conversations"] == 0 and again.preview["already"] == 2
    page = alice_client.get(f"/account/import/{again.public_id}/").content.decode()
    assert "Nothing new to import" in page and "2 conversations already imported" in page
    with pytest.raises(Exception, match="Nothing new to import"):
        services.job_start(job=settled(again, "ready"), roles={})
    assert (Session.objects.count(), Message.objects.count(), Role.objects.count()) == (
        sessions, messages, roles)  # fmt: skip
    # Deleting an imported session lets that conversation be imported again.
    Session.objects.filter(name="Sonnet about rain").delete()
    third = settled(upload(alice_client, "conversations.json", data), "ready")
    assert third.preview["conversations"] == 1 and third.preview["already"] == 1


def test_each_source_imports_with_its_models_times_and_attachments(
    alice, alice_client, celery_worker, tmp_path
):
    files = {
        "export.zip": chatgpt_zip(tmp_path / "export.zip", [chatgpt_with_image("c-pic")],
                                  {"file-Ab12Cd34Ef56-dot.png": PNG_1PX}).read_bytes(),
        "claude.json": json.dumps([claude_conversation()]).encode(),
        "openwebui.json": json.dumps([openwebui_chat()]).encode(),
        "librechat.json": json.dumps(librechat_export()).encode(),
    }  # fmt: skip
    for name, data in files.items():
        job = settled(upload(alice_client, name, data), "ready")
        services.job_start(job=job, roles={})
        job = settled(job, "done")
        assert len(job.report["sessions"]) == 1, (name, job.report)
    picture = Session.objects.get(name="A picture")
    attached = Attachment.objects.get(session=picture)
    assert attached.kind == "image" and attached.message.text == "What is in this picture?"
    rain = Session.objects.get(name="Sonnet about rain")
    note = Attachment.objects.get(session=rain)
    assert note.name == "notes.txt" and note.message.speaker == "user"
    assert Role.objects.filter(owner=alice, handle="claude").exists()
    recursion = Session.objects.get(name="Recursion")
    assert Thread.objects.filter(session=recursion).count() == 2
    assert Attachment.objects.filter(session=recursion).count() == 1
    speakers = set(
        Message.objects.filter(thread__session=recursion).values_list("speaker", flat=True)
    )
    assert speakers == {"user", "llama3-1-8b", "qwen2-5-7b"}
    moons = Session.objects.get(name="Moons")
    reply = Message.objects.get(
        thread__session=moons, thread__parent=None, speaker__startswith="gpt"
    )
    assert reply.model == "gpt-4o-mini" and reply.created_at.year == 2024


def test_a_parley_export_comes_back_the_same(alice, alice_client, celery_worker, roles):
    from apps.chat.records.sessions import session_create

    session = session_create(owner=alice, name="Original")
    thread = session.active_thread
    thread.label = "Plot twists"
    thread.save()
    for seq, (speaker, text) in enumerate(
        [("user", "Pitch a twist"), ("director", "The narrator is the ghost."),
         ("user", "Another"), ("actor_agent", "The ghost is the audience.")], start=1
    ):  # fmt: skip
        Message.objects.create(thread=thread, seq=seq, speaker=speaker, status="done",
                               content=[{"type": "text", "text": text}],
                               model="" if speaker == "user" else "demo-1",
                               author=alice if speaker == "user" else None)  # fmt: skip
    exported, _ = export_json(thread, user=alice)
    job = settled(upload(alice_client, "plot-twists.json", exported.encode()), "ready")
    assert sorted(v["name"] for v in job.preview["voices"]) == ["actor_agent", "director"]
    # Each role's replies go back to the role of that handle.
    services.job_start(job=job, roles={"director": "director", "actor_agent": "actor_agent"})
    job = settled(job, "done")
    imported = Session.objects.get(public_id=job.report["sessions"][0]["id"])
    again = [
        (m.speaker, m.text, m.model) for m in transcript_messages(thread=imported.active_thread)
    ]
    assert again == [(m.speaker, m.text, m.model) for m in transcript_messages(thread=thread)]
    assert imported.active_thread.label == "Plot twists"


def test_a_broken_conversation_is_reported_and_the_rest_imported(
    alice, alice_client, celery_worker
):
    broken = chatgpt_trip("c-broken")
    broken["mapping"]["a2"]["parent"] = "q2"
    broken["mapping"]["q2"]["parent"] = "a2"  # a loop
    data = json.dumps([chatgpt_trip("c-ok"), broken, claude_conversation()]).encode()
    job = settled(upload(alice_client, "conversations.json", data), "ready")
    assert job.preview["conversations"] == 2
    assert (
        job.preview["broken"][0]["position"] == 2 and "loop" in job.preview["broken"][0]["reason"]
    )
    services.job_start(job=job, roles={})
    job = settled(job, "done")
    assert len(job.report["sessions"]) == 2 and job.report["broken"][0]["position"] == 2
    page = alice_client.get(f"/account/import/{job.public_id}/").content.decode()
    assert "Not imported" in page and "loop" in page


def test_a_file_that_is_no_export_fails_with_the_reason_and_keeps_nothing(
    alice, alice_client, celery_worker
):
    job = settled(upload(alice_client, "notes.json", b"hello, not JSON"), "failed")
    assert "not a JSON export" in job.error and not job.file
    assert (
        "not a JSON export"
        in alice_client.get(f"/account/import/{job.public_id}/").content.decode()
    )
    response = alice_client.post("/account/import/", {})
    assert response.status_code == 422 and "Choose an export file" in response.content.decode()
    empty = alice_client.post("/account/import/", {"file": SimpleUploadedFile("e.json", b"")})
    assert empty.status_code == 422 and "empty" in empty.content.decode()


def test_another_persons_import_is_not_found(alice, bob, alice_client, celery_worker):
    job = settled(
        upload(alice_client, "c.json", json.dumps([claude_conversation()]).encode()), "ready"
    )
    bob_client = Client()
    bob_client.force_login(bob)
    for url in ("", "progress/"):
        assert bob_client.get(f"/account/import/{job.public_id}/{url}").status_code == 404
    assert bob_client.post(f"/account/import/{job.public_id}/start/").status_code == 404
    assert bob_client.post(f"/account/import/{job.public_id}/cancel/").status_code == 404
    assert "c.json" not in bob_client.get("/account/import/").content.decode()


def test_a_role_choice_must_be_one_the_person_may_use(alice, bob, alice_client, celery_worker):
    Role.objects.create(owner=bob, handle="bobs-own", display_name="Bob's")
    job = settled(
        upload(alice_client, "c.json", json.dumps([claude_conversation()]).encode()), "ready"
    )
    response = alice_client.post(f"/account/import/{job.public_id}/start/", {"role_0": "bobs-own"})
    assert response.status_code == 422 and "There is no role @bobs-own" in response.content.decode()
    assert ImportJob.objects.get(pk=job.pk).status == "ready"


def test_cancelling_stops_between_conversations_and_keeps_what_was_imported(
    alice, alice_client, celery_worker, settings
):
    many = [chatgpt_trip(f"c-{n}") for n in range(400)]
    job = settled(upload(alice_client, "conversations.json", json.dumps(many).encode()), "ready")
    services.job_start(job=job, roles={})
    wait_until(lambda: ImportJob.objects.get(pk=job.pk).done >= 1, timeout=30)
    response = alice_client.post(f"/account/import/{job.public_id}/cancel/")
    assert response.status_code == 302
    job = settled(job, "cancelled", "done")
    made = ImportedConversation.objects.filter(owner=alice).count()
    assert job.status == "cancelled" and 1 <= made < 400, (job.status, made)
    assert Session.objects.filter(owner=alice).count() == made
    # Importing the file again goes on from where it stopped.
    again = settled(upload(alice_client, "conversations.json", json.dumps(many).encode()), "ready")
    assert again.preview["conversations"] == 400 - made and again.preview["already"] == made


def test_a_preview_left_unstarted_for_a_day_gives_its_file_back(alice, alice_client, celery_worker):
    data = json.dumps([claude_conversation()]).encode()
    old = settled(upload(alice_client, "c.json", data), "ready")
    path = old.file.path
    ImportJob.objects.filter(pk=old.pk).update(created_at=old.created_at - timedelta(days=2))
    settled(upload(alice_client, "c.json", data), "ready")
    old.refresh_from_db()
    assert old.status == "cancelled" and not old.file and "discarded" in old.error
    assert not Path(path).exists()


@pytest.mark.parametrize("place", ["disk", "bucket"])
def test_a_big_file_arrives_in_pieces_that_resume_where_the_server_says(
    place, alice, bob, alice_client, celery_worker, monkeypatch, request
):
    """On disk, or in a bucket of object storage (moto's S3), where each piece is an object
    and the worker joins them into a copy of its own to read."""
    if place == "bucket":
        request.getfixturevalue("on_s3")
    monkeypatch.setattr(services, "PIECE_BYTES", 1000)
    data = json.dumps([chatgpt_trip(f"c-{n}") for n in range(3)]).encode()
    begun = alice_client.post("/account/import/begin/", {"name": "big.json", "size": len(data)})
    assert begun.status_code == 201
    state = begun.json()
    assert state["received"] == 0 and state["status"] == "uploading"

    def send(offset: int, piece: bytes, client=alice_client):
        return client.post(f"{state['piece_url']}?offset={offset}", piece,
                           content_type="application/octet-stream")  # fmt: skip

    assert send(0, data[:1000]).json()["received"] == 1000
    # A piece sent again, or one that skips ahead, is refused with where to go on.
    for offset in (0, 2000):
        again = send(offset, data[offset : offset + 1000])
        assert again.status_code == 409 and again.json()["received"] == 1000
    too_big = send(1000, data[1000:2001])
    assert too_big.status_code == 413 and too_big.json()["received"] == 1000
    bob_client = Client()
    bob_client.force_login(bob)
    assert send(1000, data[1000:2000], client=bob_client).status_code == 404
    page = alice_client.get(f"/account/import/{state['id']}/").content.decode()
    assert "Uploading… 1000" in page
    offset = 1000
    while offset < len(data):
        offset = send(offset, data[offset : offset + 1000]).json()["received"]
    job = settled(ImportJob.objects.get(public_id=state["id"]), "ready")
    assert job.preview["conversations"] == 3
    with staging.local_file(job.file.name) as stored:
        assert stored.read_bytes() == data
    kept = list(files_under("imports/", import_storage()))
    assert len(kept) == (1 if place == "disk" else -(-len(data) // 1000))  # the file, or pieces
    services.job_start(job=job, roles={})
    job = settled(job, "done")
    assert job.report["made"] == 3 and not job.file
    # Nothing is left behind (the job ends first, then its file goes).
    wait_until(lambda: not list(files_under("imports/", import_storage())), timeout=10)
    copies = Path(settings.VAR_DIR) / "import-copies"
    assert not copies.exists() or not any(copies.iterdir())
    refused = alice_client.post("/account/import/begin/", {"name": "e.json", "size": "0"})
    assert refused.status_code == 422 and refused.json()["detail"] == "That file is empty."


def test_an_imported_chat_goes_on_with_the_credential_its_person_uses(alice, bob, roles):
    """Continuing an imported chat is answered by the model the person uses, not the demo."""
    from apps.chat.records.imported import ImportedMessage, ImportedThread, session_import
    from apps.chat.records.sessions import session_create
    from apps.providers.services import credential_save

    mine = credential_save(
        owner=alice, name="Mine", provider="openai_compatible",
        base_url="http://127.0.0.1:9/v1", api_key="",
    )  # fmt: skip
    session_create(owner=alice, name="Work", credential=mine, model="llama3.1")
    thread = ImportedThread(messages=[ImportedMessage(speaker="user", text="Hello from 2024")])
    written = session_import(owner=alice, name="Old chat", roles=None, threads=[thread])
    assert written.session.credential == mine and written.session.model == "llama3.1"
    # Bob has no credential: his imported chat is the demo's, as the summary strip says.
    written = session_import(owner=bob, name="His", roles=None, threads=[thread])
    assert written.session.credential is None
