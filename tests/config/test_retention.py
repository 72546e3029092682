"""Retention (issue 49): a deleted session's bytes go with it — its attachments, a PDF's
first page, its library's files, its workspace — and the sweep removes what nothing uses any
more (files a crash left, avatars no role shows, uploads nobody imported), never a file that
is still named or younger than its grace."""

from __future__ import annotations

import os
import time
from datetime import timedelta

import pytest
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.utils import timezone

from apps.chat.council.lifecycle import session_delete
from apps.chat.models import Attachment, Session
from apps.chat.records.attachments import attachment_add
from apps.chat.records.library import library_add
from apps.chat.records.sessions import session_create, session_workspace
from apps.imports.models import ImportJob, ImportStatus
from apps.library.selectors import stored_name as library_name
from apps.roles.models import Role
from apps.workspace.files import workspace_keys
from config.retention import sweep
from tests.attachments.test_sniff import image_bytes, text_pdf

pytestmark = pytest.mark.django_db(transaction=True)
HOUR = 3600


def age(name: str, seconds: float) -> None:
    """Make a stored file look `seconds` old (the sweep's grace is an hour)."""
    then = time.time() - seconds
    os.utime(default_storage.path(name), (then, then))


def session_with_files(owner, label: str) -> tuple[Session, list[str]]:
    session = session_create(owner=owner, name=label)
    thread = session.active_thread
    photo = attachment_add(session=session, owner=owner, thread=thread, name="photo.png",
                           data=image_bytes("PNG", size=(40 + len(label), 30)))  # fmt: skip
    brief = attachment_add(session=session, owner=owner, thread=thread, name="brief.pdf",
                           data=text_pdf(f"The brief of {label}"))  # fmt: skip
    document = library_add(session=session, by=owner, name="guide.md",
                           data=f"# Guide of {label}\n\nThe harbour at dawn.".encode())  # fmt: skip
    session_workspace(session).write("notes.md", f"notes of {label}".encode())
    names = [photo.file.name, brief.file.name, brief.preview.name, library_name(document)]
    assert all(names) and all(default_storage.exists(name) for name in names)
    return session, names


def test_a_deleted_session_takes_its_bytes_with_it_and_leaves_the_others(alice, bob):
    gone, gone_files = session_with_files(alice, "gone")
    kept, kept_files = session_with_files(bob, "kept")
    assert gone.public_id.hex in workspace_keys()
    session_delete(session=gone)
    assert not any(default_storage.exists(name) for name in gone_files)
    assert gone.public_id.hex not in workspace_keys()
    assert not os.path.exists(default_storage.path(f"attachments/{gone.public_id}"))
    assert all(default_storage.exists(name) for name in kept_files)
    assert session_workspace(kept).read("notes.md") == "notes of kept"


def test_the_sweep_removes_only_old_files_that_nothing_uses(alice):
    session, files = session_with_files(alice, "live")
    # What a crash leaves: the files of a session deleted without its bytes (deleted in the
    # admin, say), a file saved for a row that never committed, an avatar no role shows, an
    # upload no job names. And the same kinds, young: their rows may still be coming.
    orphaned, orphaned_files = session_with_files(alice, "orphaned")
    Session.objects.filter(pk=orphaned.pk).delete()
    stray = default_storage.save(f"attachments/{session.public_id}/{'0' * 64}.png",
                                 ContentFile(b"no row"))  # fmt: skip
    young = default_storage.save(f"attachments/{session.public_id}/{'1' * 64}.png",
                                 ContentFile(b"row coming"))  # fmt: skip
    avatar_shown = default_storage.save("avatars/shown.png", ContentFile(b"shown"))
    Role.objects.filter(pk=Role.objects.order_by("pk").first().pk).update(avatar=avatar_shown)
    avatar_unshown = default_storage.save("avatars/unshown.png", ContentFile(b"unshown"))
    upload_unnamed = default_storage.save("imports/unnamed.json", ContentFile(b"[]"))
    for name in [*files, *orphaned_files, stray, avatar_shown, avatar_unshown, upload_unnamed]:
        age(name, 2 * HOUR)
    removed = sweep()
    assert removed == {
        "import uploads expired": 0,
        "import files no job names": 1,
        "chat files of deleted sessions or no row": len(orphaned_files) + 1,
        "workspace folders of deleted sessions": 1,
        "avatars no role shows": 1,
    }
    assert all(default_storage.exists(name) for name in [*files, young, avatar_shown])
    gone = [*orphaned_files, stray, avatar_unshown, upload_unnamed]
    assert not any(default_storage.exists(name) for name in gone)
    assert workspace_keys() == [session.public_id.hex]
    assert Attachment.objects.filter(session=session).count() == 2
    assert sweep() == dict.fromkeys(removed, 0)  # nothing left to do


def test_an_upload_nobody_imported_expires_with_its_file(alice, settings):
    settings.PARLEY_IMPORT_UPLOAD_HOURS = 24

    def job(status: str, hours_ago: float) -> ImportJob:
        stored = default_storage.save("imports/export.json", ContentFile(b"[]"))
        made = ImportJob.objects.create(owner=alice, name="export.json", size=2, received=2,
                                        file=stored, status=status)  # fmt: skip
        ImportJob.objects.filter(pk=made.pk).update(
            created_at=timezone.now() - timedelta(hours=hours_ago)
        )
        return made

    read_not_imported = job(ImportStatus.READY, 25)
    never_finished = job(ImportStatus.UPLOADING, 30)
    waiting_today = job(ImportStatus.READY, 2)
    importing = job(ImportStatus.IMPORTING, 48)  # a worker has it: not the sweep's
    assert sweep()["import uploads expired"] == 2
    for expired in (read_not_imported, never_finished):
        expired.refresh_from_db()
        assert expired.status == ImportStatus.FAILED and not expired.file
        assert "24 hours" in expired.error and "send it again" in expired.error
    for kept in (waiting_today, importing):
        name = kept.file.name
        kept.refresh_from_db()
        assert kept.file.name == name and default_storage.exists(name)
