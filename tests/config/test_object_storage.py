"""Files on S3-compatible object storage (issue 49), with moto's S3 server on this machine:
each process has its own local folders (var/, media) and shares only the database, Redis and
the bucket. A photo stored by one process reaches the model from the worker, the web process
serves it and a PDF's first page, the library reads a document, and a deleted session's
objects go; nothing lands on any process's disk."""

from __future__ import annotations

import asyncio
import base64
import urllib.request

import boto3
import pytest
from django.core.files.storage import default_storage

from apps.chat.council.lifecycle import session_delete
from apps.chat.models import Attachment, Message, MessageStatus
from apps.chat.records.attachments import attachment_add
from apps.chat.records.library import library_add
from apps.chat.records.sessions import session_create
from apps.library.selectors import stored_name as library_name
from apps.providers.emulator import Script
from tests.attachments.test_sniff import image_bytes, text_pdf
from tests.chat.test_faults import cookie_for, reply_of
from tests.conftest import wait_until
from tests.object_storage import BUCKET, KEYS
from tests.topology import post

pytestmark = pytest.mark.django_db(transaction=True)


def objects(endpoint: str) -> list[str]:
    listed = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1").list_objects_v2(
        Bucket=BUCKET
    )
    return sorted(item["Key"] for item in listed.get("Contents", []))


def test_a_photo_on_object_storage_reaches_the_model_from_another_process_and_is_served(
    on_s3,
    topology,
    tmp_path,
    alice,
    emulator,
    anthropic_thread,
):
    shared = {"PARLEY_STORAGE": "s3", "PARLEY_S3_ENDPOINT_URL": on_s3,
              "PARLEY_S3_BUCKET": BUCKET, **KEYS}  # fmt: skip
    topology.env.update(shared)
    # Each process its own disk: only the database, Redis and the bucket are shared.
    worker = topology.start_worker(
        "worker", supervised=True, env={"PARLEY_VAR_DIR": str(tmp_path / "worker-var")}
    )
    web = topology.start_web("web", env={"PARLEY_VAR_DIR": str(tmp_path / "web-var")})
    wait_until(lambda: "ready." in worker.output(), timeout=60)
    thread = anthropic_thread
    emulator.script(Script(text="A harbour at dawn.", provider="anthropic"))
    photo_bytes = image_bytes("PNG", size=(90, 60))
    photo = attachment_add(session=thread.session, owner=alice, thread=thread,
                           name="harbour.png", data=photo_bytes)  # fmt: skip
    brief = attachment_add(session=thread.session, owner=alice, thread=thread,
                           name="brief.pdf", data=text_pdf("The harbour brief"))  # fmt: skip
    assert f"attachments/{thread.session.public_id}/" in photo.file.name
    assert photo.file.name in objects(on_s3) and brief.preview.name in objects(on_s3)
    cookie = cookie_for(alice)
    asyncio.run(post(web, str(thread.public_id), cookie, "@assistant what is in the photo?",
                     attachments=(photo.public_id, brief.public_id)))  # fmt: skip
    reply = reply_of(thread)
    wait_until(lambda: Message.objects.get(pk=reply.pk).status == MessageStatus.DONE,
               timeout=60)  # fmt: skip
    (image,) = [  # in the reply's request (naming the thread makes one of its own)
        block
        for request in emulator.requests
        for message in request.body.get("messages", [])
        if isinstance(message["content"], list)
        for block in message["content"]
        if block.get("type") == "image"
    ]
    data = image["source"]["data"]
    assert base64.b64decode(data) == photo_bytes  # read from the bucket by the worker
    for path, expected in ((f"/a/{photo.public_id}/", photo_bytes),
                           (f"/a/{brief.public_id}/preview/",
                            default_storage.open(brief.preview.name).read())):  # fmt: skip
        request = urllib.request.Request(web.url + path, headers={"Cookie": cookie})
        with urllib.request.urlopen(request, timeout=30) as response:
            assert response.read() == expected
    for var in ("worker-var", "web-var"):  # nothing of it on either process's disk
        assert not list((tmp_path / var).glob("media/attachments/**/*.png"))
    assert "Traceback" not in web.output() + worker.output()


def test_the_library_and_a_deleted_sessions_objects_on_object_storage(on_s3, alice, roles):
    session = session_create(owner=alice, name="On the bucket")
    document = library_add(session=session, by=alice, name="guide.md",
                           data=b"# Guide\n\nThe harbour bell rings at dawn.")  # fmt: skip
    attachment = attachment_add(session=session, owner=alice, thread=session.active_thread,
                                name="photo.png", data=image_bytes("PNG"))  # fmt: skip
    kept = [library_name(document), attachment.file.name]
    assert all(name in objects(on_s3) for name in kept)
    assert Attachment.objects.filter(session=session).count() == 1
    session_delete(session=session)
    assert not any(name in objects(on_s3) for name in kept)
