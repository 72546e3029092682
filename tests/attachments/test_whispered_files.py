"""A whispered attachment saved to the session's files (issue 45, item 11): the files are open
to the whole room and every role, so the save says who sees the file now and who would, and
keeps it to the whisper unless its person chooses to save it for everyone."""

from __future__ import annotations

import pytest
from django.test import Client

from apps.chat.council.posting import message_post
from apps.chat.records.attachments import attachment_add
from apps.chat.records.rooms import member_add
from apps.chat.records.sessions import session_workspace
from tests.attachments.test_sniff import image_bytes

pytestmark = pytest.mark.django_db


def test_a_whispered_file_is_saved_for_everyone_only_when_its_person_says_so(
    alice, bob, charlie, alice_thread
):
    session = alice_thread.session
    member_add(session=session, by=alice, username="bob")
    member_add(session=session, by=alice, username="charlie")
    photo = attachment_add(session=session, owner=alice, thread=alice_thread,
                           name="private.png", data=image_bytes("PNG"))  # fmt: skip
    message_post(thread=alice_thread, author=alice, text="/whisper @bob @assistant look",
                 attachments=[photo])  # fmt: skip
    client = Client()
    client.force_login(alice)
    url = f"/a/{photo.public_id}/save/"
    asked = client.post(url)
    assert asked.status_code == 409
    said = asked.content.decode()
    assert "only" in said and "bob" in said and "@assistant" in said
    assert "everyone in the room (3 people) and to every role" in said
    workspace = session_workspace(session)
    assert not workspace.files()  # nothing saved: the file stays with the whisper
    saved = client.post(url, {"everyone": "1"})
    assert saved.status_code == 200
    assert "everyone in the room and every role can read it" in saved.content.decode()
    assert [info.path for info in workspace.files()] == ["attachments/private.png"]


def test_a_file_sent_to_the_room_is_saved_at_once(alice, alice_thread):
    photo = attachment_add(session=alice_thread.session, owner=alice, thread=alice_thread,
                           name="open.png", data=image_bytes("PNG"))  # fmt: skip
    message_post(thread=alice_thread, author=alice, text="@assistant look", attachments=[photo])
    client = Client()
    client.force_login(alice)
    assert client.post(f"/a/{photo.public_id}/save/").status_code == 200
