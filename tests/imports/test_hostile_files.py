"""Files that try to hurt: nesting that costs the reader memory as depth², a CPU bomb, repeated
ids that make a tree loop, damaged zips, ids and dates out of range. Each fails its own job (or
its own conversation) with a sentence; the worker, the other conversations and the pages
carry on. The tasks run here as the worker runs them (the reader is a real child process)."""

from __future__ import annotations

import json
import os
import zipfile
from datetime import timedelta
from pathlib import Path

import pytest
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.db import DatabaseError
from django.test import Client
from django.utils import timezone

from apps.chat.models import Attachment, Message, Session
from apps.imports import services, tasks
from apps.imports.models import ImportedConversation, ImportJob, ImportStatus
from tests.conftest import wait_until
from tests.imports.exports import (
    PNG_1PX,
    chatgpt_trip,
    chatgpt_with_image,
    claude_conversation,
    librechat_export,
)

pytestmark = pytest.mark.django_db(transaction=True)


def job_for(owner, data: bytes, name: str = "conversations.json") -> ImportJob:
    """A job whose file has arrived, as job_create leaves it (its task not sent)."""
    stored = default_storage.save(f"imports/test-{os.urandom(6).hex()}-{name}", ContentFile(data))
    return ImportJob.objects.create(
        owner=owner, name=name, size=len(data), received=len(data), file=stored,
        status=ImportStatus.READING,
    )  # fmt: skip


def previewed(owner, data: bytes, name: str = "conversations.json") -> ImportJob:
    job = job_for(owner, data, name)
    tasks.preview_import(job.pk)
    return ImportJob.objects.get(pk=job.pk)


def imported(job: ImportJob) -> ImportJob:
    """Started as the page starts it; the worker imports it."""
    assert job.status == ImportStatus.READY, (job.status, job.error)
    services.job_start(job=job, roles={})
    return ended(job)


def ended(job: ImportJob) -> ImportJob:
    wait_until(lambda: ImportJob.objects.get(pk=job.pk).finished_at, timeout=60,
               message="the import did not end")  # fmt: skip
    return ImportJob.objects.get(pk=job.pk)


def stored_files() -> set[str]:
    root = Path(default_storage.location)
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}


def test_a_list_nested_200000_deep_is_refused_before_it_is_built(alice):
    """400 KB that grew a worker to 15 GB: refused by a pass that builds nothing."""
    data = b"[" * 200_001 + b"]" * 200_001
    job = previewed(alice, data)
    assert job.status == ImportStatus.FAILED
    assert job.error == (
        "No conversation in it can be read: conversation 1 its data nests 200,000 levels deep "
        "(Parley reads up to 200)."
    )
    assert not job.file and not default_storage.exists(job.file.name or "none")


def test_an_object_nested_100000_deep_fails_with_a_sentence(alice):
    data = b'{"a":' * 100_000 + b"1" + b"}" * 100_000
    job = previewed(alice, data, "chat.json")
    assert job.status == ImportStatus.FAILED and "nests its data" in job.error


def test_a_reader_that_needs_more_memory_than_its_ceiling_fails_its_job_only(alice, settings):
    """One conversation of eight million objects: about 600 MB in the reader."""
    settings.PARLEY_IMPORT_MEMORY_MB = 256
    data = b'[{"mapping": {"x": {"parts": [' + b",".join([b"{}"] * 8_000_000) + b"]}}}]"
    job = previewed(alice, data)
    assert job.status == ImportStatus.FAILED
    assert "needed more than 256 MB of memory" in job.error
    # This process (the worker's) is untouched, and the next file reads.
    assert previewed(alice, json.dumps([claude_conversation()]).encode()).status == "ready"


def test_a_reader_past_its_cpu_ceiling_fails_its_job(alice, settings):
    settings.PARLEY_IMPORT_CPU_SECONDS, settings.PARLEY_IMPORT_CPU_SECONDS_PER_MB = 1, 0
    data = b'[{"mapping": {"x": {"parts": [' + b",".join([b"{}"] * 5_000_000) + b"]}}}]"
    job = previewed(alice, data)
    assert job.status == ImportStatus.FAILED and "took more than 1 s of work" in job.error


def test_a_deep_conversation_is_reported_and_the_others_import(alice, celery_worker):
    healthy = json.dumps(chatgpt_trip("c-ok"))
    deep = chatgpt_trip("c-deep")
    deep["title"] = "Too deep"
    deep["mapping"]["q1"]["message"]["content"]["parts"] = ["PLACEHOLDER"]
    deep_text = json.dumps(deep).replace('"PLACEHOLDER"', "[" * 5000 + "]" * 5000)
    third = json.dumps(claude_conversation())
    job = previewed(alice, f"[{healthy},{deep_text},{third}]".encode())
    assert job.preview["conversations"] == 2
    [broken] = job.preview["broken"]
    assert broken["position"] == 2 and broken["title"] == "Too deep"
    assert "nests 5,00" in broken["reason"] and "Parley reads up to 200" in broken["reason"]
    job = imported(job)
    assert job.status == ImportStatus.DONE and job.report["made"] == 2
    assert job.report["broken"][0]["position"] == 2


def test_repeated_message_ids_are_reported_not_walked_for_ever(alice):
    """LibreChat: m1 -> m2 -> m1, and a second m1 at the root."""
    export = librechat_export(nested=False)
    m1 = {**export["messages"][0], "messageId": "m1", "parentMessageId": "m2"}
    m2 = {**export["messages"][1], "messageId": "m2", "parentMessageId": "m1"}
    root = {**export["messages"][0], "messageId": "m1"}
    export["messages"] = [m1, m2, root]
    job = previewed(alice, json.dumps(export).encode(), "librechat.json")
    assert job.status == ImportStatus.FAILED
    assert job.error == (
        "No conversation in it can be read: conversation 1 two of its messages have the same "
        "id ('m1')."
    )


def test_a_damaged_image_in_the_zip_breaks_its_conversation_only(alice, tmp_path, celery_worker):
    path = tmp_path / "export.zip"
    conversations = [chatgpt_with_image("c-pic"), chatgpt_trip("c-trip")]
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_STORED) as archive:
        archive.writestr("conversations.json", json.dumps(conversations))
        archive.writestr("file-Ab12Cd34Ef56-photo.png", PNG_1PX)
    data = bytearray(path.read_bytes())
    at = data.index(PNG_1PX[16:32])
    data[at] ^= 0xFF  # the stored bytes no longer match their CRC
    job = previewed(alice, bytes(data), "export.zip")
    assert job.status == ImportStatus.READY, job.error
    [broken] = job.preview["broken"]
    assert broken["position"] == 1 and "damaged in the .zip" in broken["reason"]
    assert imported(job).report["made"] == 1


def test_an_id_longer_than_the_column_imports_once(alice, celery_worker):
    long_id = "x" * 300
    data = json.dumps([chatgpt_trip(long_id)]).encode()
    job = imported(previewed(alice, data))
    assert job.status == ImportStatus.DONE and job.report["made"] == 1, job.report
    again = previewed(alice, data)
    assert again.preview["already"] == 1 and again.preview["conversations"] == 0


def test_dates_outside_pythons_range_are_dropped_and_no_page_fails(alice, celery_worker):
    early = claude_conversation("11111111-0000-4000-8000-000000000001")
    late = claude_conversation("11111111-0000-4000-8000-000000000002")
    early["created_at"] = "0001-01-01T00:00:00+14:00"
    late["created_at"] = late["updated_at"] = "9999-12-31T23:59:59-14:00"
    for message in early["chat_messages"]:
        message["created_at"] = "0001-01-01T00:00:00+14:00"
    job = imported(previewed(alice, json.dumps([early, late]).encode()))
    assert job.status == ImportStatus.DONE and job.report["made"] == 2, job.report
    years = {m.created_at.year for m in Message.objects.filter(thread__session__owner=alice)}
    assert min(years) >= 1990 and max(years) <= timezone.now().year + 1
    client = Client()
    client.force_login(alice)
    assert client.get("/").status_code == 200
    for session in Session.objects.filter(owner=alice):
        assert client.get(f"/s/{session.public_id}/", follow=True).status_code == 200
    assert client.get("/search/?q=rain").status_code == 200


def test_a_conversation_that_fails_midway_leaves_nothing_and_the_rest_import(
    alice, monkeypatch, celery_worker
):
    """[healthy, broken, healthy]: the broken one's rows and its stored image go back."""
    real = services.session_import

    def failing(**kwargs):
        written = real(**kwargs)
        if kwargs["name"] == "A picture":
            raise DatabaseError("the database refused it")  # after its image was stored
        return written

    monkeypatch.setattr(services, "session_import", failing)
    from tests.imports.exports import zip_bytes

    data = zip_bytes({
        "conversations.json": json.dumps(
            [chatgpt_trip("c-1"), chatgpt_with_image("c-pic"), chatgpt_trip("c-3")]
        ).encode(),
        "file-Ab12Cd34Ef56-photo.png": PNG_1PX,
    })  # fmt: skip
    before = stored_files()
    job = imported(previewed(alice, data, "export.zip"))
    assert job.status == ImportStatus.DONE and job.report["made"] == 2
    [broken] = job.report["broken"]
    assert broken == {"position": 2, "title": "A picture",
                      "reason": "it could not be written (Parley kept nothing of it)"}  # fmt: skip
    assert not Attachment.objects.exists()
    assert not Session.objects.filter(name="A picture").exists()
    assert stored_files() - before == set()  # the image's bytes went with its rows


def test_cancel_ends_a_job_while_its_file_arrives_or_is_read(alice):
    for status in (ImportStatus.UPLOADING, ImportStatus.READING, ImportStatus.READY):
        job = job_for(alice, b"[]")
        ImportJob.objects.filter(pk=job.pk).update(status=status)
        job = services.job_cancel(job=ImportJob.objects.get(pk=job.pk))
        assert job.status == ImportStatus.CANCELLED and not job.file


def test_cancel_while_importing_stops_the_reader(alice, celery_worker):
    data = json.dumps([chatgpt_trip(f"c-{n}") for n in range(40)]).encode()
    job = previewed(alice, data)
    ImportJob.objects.filter(pk=job.pk).update(cancel_requested=True)  # pressed as it starts
    services.job_start(job=job, roles={})
    job = ended(job)
    assert job.status == ImportStatus.CANCELLED and job.report["made"] < 40
    assert not job.file


def test_a_redelivered_task_is_failed_not_run_again(alice):
    """The task came back: the worker that had it died with it (a file that kills workers
    must not kill the next one)."""
    job = job_for(alice, json.dumps([claude_conversation()]).encode())
    ImportJob.objects.filter(pk=job.pk).update(attempts=1)
    tasks.preview_import(job.pk)
    job = ImportJob.objects.get(pk=job.pk)
    assert job.status == ImportStatus.FAILED and "was not tried again" in job.error
    assert not job.file


def test_a_sweep_ends_jobs_whose_worker_stopped_beating(alice):
    stale = job_for(alice, b"[]")
    alive = job_for(alice, b"[]")
    ImportJob.objects.filter(pk=stale.pk).update(heartbeat_at=timezone.now() - timedelta(minutes=6))
    ImportJob.objects.filter(pk=alive.pk).update(heartbeat_at=timezone.now())
    assert services.jobs_sweep() == 1
    assert ImportJob.objects.get(pk=stale.pk).status == ImportStatus.FAILED
    assert ImportJob.objects.get(pk=alive.pk).status == ImportStatus.READING


def test_two_imports_of_one_file_race_to_one_result(alice, celery_worker):
    """Both previewed, both started at once (the worker runs them side by side): each
    conversation is one session, whichever job wrote it, and the loser's rows go back."""
    data = json.dumps([chatgpt_trip(f"c-{n}") for n in range(6)]).encode()
    first, second = previewed(alice, data), previewed(alice, data)
    for job in (first, second):
        services.job_start(job=job, roles={})
    reports = [ended(job).report for job in (first, second)]
    assert sum(r["made"] for r in reports) == 6 and sum(r["already"] for r in reports) == 6
    assert ImportedConversation.objects.filter(owner=alice).count() == 6
    assert Session.objects.filter(owner=alice).count() == 6


def test_a_time_out_of_range_stored_before_is_brought_back_in_range(alice, alice_thread):
    """A value an earlier import stored (year 1 at +14:00) made the person's pages fail for
    good; the migration brings it into range without reading it."""
    from importlib import import_module

    from django.apps import apps
    from django.db import connection

    from apps.chat.council.posting import message_post

    posted = message_post(thread=alice_thread, author=alice, text="an old message")
    table = posted.user_message._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE {table} SET created_at = %s WHERE id = %s",  # noqa: S608
                       ["0001-01-01 00:00:00+14:00", posted.user_message.pk])  # fmt: skip
    planted = Message.objects.filter(pk=posted.user_message.pk, created_at__lt="1900-01-01")
    assert planted.exists()
    import_module("apps.chat.migrations.0023_clamp_imported_times").clamp(apps, None)
    client = Client()
    client.force_login(alice)
    assert client.get(f"/t/{alice_thread.public_id}/").status_code == 200
    assert client.get("/").status_code == 200
    assert Message.objects.get(pk=posted.user_message.pk).created_at.year == 1990
