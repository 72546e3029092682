"""Backup and restore (issue 49): `python -m config.backup create` while Parley holds
sessions with messages, attachments, PDFs' first pages, a library and a workspace; `restore`
into an empty database and empty storage; a web process on the restored copy then opens
every thread and serves every attachment, byte for byte."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import urllib.request
import uuid

import psycopg
import pytest
from django.core.files.storage import default_storage
from django.db import connection

from apps.chat.council.posting import message_post
from apps.chat.models import Attachment, Message, MessageStatus, Thread
from apps.chat.records.attachments import attachment_add
from apps.chat.records.library import library_add
from apps.chat.records.sessions import session_create, session_workspace
from config import backup
from tests.attachments.test_sniff import image_bytes, text_pdf
from tests.chat.test_faults import cookie_for
from tests.topology import ROOT

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def empty_database(tmp_path):
    """A new, empty database of the suite's kind, as a URL; dropped afterwards."""
    if connection.vendor == "sqlite":
        yield f"sqlite:///{tmp_path / 'restored.sqlite3'}"
        return
    db = connection.settings_dict
    name = f"parley_restore_{uuid.uuid4().hex[:10]}"
    server = {
        "host": db.get("HOST") or "127.0.0.1",
        "port": db.get("PORT") or 5432,
        "user": db.get("USER") or "postgres",
        "password": db.get("PASSWORD") or None,
    }
    with psycopg.connect(dbname="postgres", autocommit=True, **server) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    credentials = (
        f"{server['user']}:{server['password']}@" if server["password"] else (f"{server['user']}@")
    )
    yield f"postgres://{credentials}{server['host']}:{server['port']}/{name}"
    with psycopg.connect(dbname="postgres", autocommit=True, **server) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def a_session(owner, label: str) -> Thread:
    """A session whose thread holds a message with a photo and a PDF, a settled reply, a
    library document and a workspace file."""
    session = session_create(owner=owner, name=f"Session {label}")
    thread = session.active_thread
    sent = [
        attachment_add(
            session=session,
            owner=owner,
            thread=thread,
            name=f"photo-{label}.png",
            data=image_bytes("PNG", size=(60 + len(label), 40)),
        ),
        attachment_add(
            session=session,
            owner=owner,
            thread=thread,
            name=f"brief-{label}.pdf",
            data=text_pdf(f"The brief of {label}"),
        ),
    ]
    posted = message_post(
        thread=thread, author=owner, text=f"@assistant Look at these, {label}", attachments=sent
    )
    for reply in posted.replies:
        Message.objects.filter(pk=reply.pk).update(
            status=MessageStatus.DONE, content=[{"type": "text", "text": f"Reply about {label}"}]
        )
    library_add(session=session, by=owner, name=f"guide-{label}.md", data=b"# The harbour guide")
    session_workspace(session).write("notes.md", f"notes of {label}".encode())
    return thread


def restore(folder, env: dict) -> subprocess.CompletedProcess:
    """`python -m config.backup restore` as an administrator runs it, on `env`'s places."""
    command = [sys.executable, "-m", "config.backup", "restore", str(folder)]
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)


def get(url: str, cookie: str) -> bytes:
    request = urllib.request.Request(url, headers={"Cookie": cookie})
    with urllib.request.urlopen(request, timeout=30) as response:
        assert response.status == 200, url
        return response.read()


def test_a_backup_restores_into_an_empty_database_and_storage_and_every_thread_opens(
    alice, topology, empty_database, tmp_path
):
    threads = [a_session(alice, label) for label in ("harbour", "market", "lighthouse")]
    cookie = cookie_for(alice)  # its session row goes into the backup too
    attachments = list(Attachment.objects.filter(message__isnull=False))
    assert len(attachments) == 6 and all(a.preview for a in attachments if a.kind == "pdf")
    originals = {a.public_id: default_storage.open(a.file.name).read() for a in attachments}

    manifest = backup.create(tmp_path / "backup")
    # The files, the PDFs' pages, the documents, and a workspace file each.
    assert len(manifest["files"]) == 6 + 3 + 3 + 3

    restored = {
        **topology.env,
        "DATABASE_URL": empty_database,
        "PARLEY_MEDIA_ROOT": str(tmp_path / "restored-media"),
        "PARLEY_WORKSPACE_ROOT": str(tmp_path / "restored-workspaces"),
    }
    run = restore(tmp_path / "backup", restored)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "Restored: the database and 15 stored files" in run.stdout
    again = restore(tmp_path / "backup", restored)
    assert again.returncode == 1 and "not empty" in again.stdout  # never mixes two installations

    web = topology.start_web("restored", env=restored)
    for thread in threads:
        page = get(f"{web.url}/t/{thread.public_id}/", cookie).decode()
        label = thread.session.name.removeprefix("Session ")
        assert f"Look at these, {label}" in page and f"Reply about {label}" in page
        assert f"photo-{label}.png" in page and f"brief-{label}.pdf" in page
    for attachment in attachments:
        served = get(f"{web.url}/a/{attachment.public_id}/", cookie)
        assert served == originals[attachment.public_id]
    assert (tmp_path / "restored-workspaces").joinpath(
        threads[0].session.public_id.hex, "notes.md"
    ).read_text() == "notes of harbour"
    assert "Traceback" not in web.output()


def test_a_damaged_backup_is_refused_before_anything_is_written(
    alice, topology, empty_database, tmp_path
):
    a_session(alice, "harbour")
    manifest = backup.create(tmp_path / "backup")
    damaged = tmp_path / "backup" / next(iter(manifest["files"]))
    damaged.write_bytes(damaged.read_bytes() + b"!")
    restored = {
        **topology.env,
        "DATABASE_URL": empty_database,
        "PARLEY_MEDIA_ROOT": str(tmp_path / "restored-media"),
    }
    run = restore(tmp_path / "backup", restored)
    assert run.returncode == 1 and "does not match its manifest" in run.stdout
    media = tmp_path / "restored-media"
    assert not media.exists() or not any(media.iterdir())
    with pytest.raises(backup.BackupError, match="exists already"):
        backup.create(tmp_path / "backup")


def test_a_backup_made_before_workspaces_were_stored_files_reads_as_todays(tmp_path):
    """Stop 55's layout: storage files by bare name, the workspaces a folder tree."""
    folder = tmp_path / "old"
    (folder / "storage" / "attachments" / "s").mkdir(parents=True)
    (folder / "storage" / "attachments" / "s" / "a.png").write_bytes(b"png")
    (folder / "workspaces" / "abc" / "notes").mkdir(parents=True)
    (folder / "workspaces" / "abc" / "notes" / "n.md").write_bytes(b"notes")
    old = {"version": 1, "database": "database.sqlite3",
           "files": {"attachments/s/a.png": {"sha256": hashlib.sha256(b"png").hexdigest(),
                                             "size": 3}}}  # fmt: skip
    (folder / "manifest.json").write_text(json.dumps(old))
    manifest = backup.read_manifest(folder)
    assert manifest["version"] == 2
    assert manifest["files"] == {
        "storage/attachments/s/a.png": old["files"]["attachments/s/a.png"],
        "workspaces/abc/notes/n.md": {"sha256": hashlib.sha256(b"notes").hexdigest(), "size": 5},
    }
