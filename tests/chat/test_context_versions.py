"""Named, versioned persona and memory (issue 24, item 3): every change is a version (who,
when, why; diff and restore); a chat keeps the versions it began with and offers the latest."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from apps.accounts.models import Persona
from apps.chat.council.posting import message_post
from apps.chat.council.requests import request_for_reply
from apps.chat.council.tools import ToolContext, run_tool
from apps.chat.models import ContextVersion, Message, MessageStatus, Thread
from apps.chat.records.threads import thread_branch, thread_create
from apps.providers.types import ToolCall

pytestmark = pytest.mark.django_db


def told(thread: Thread, text: str = "hello") -> str:
    """The system block the thread's next reply would be sent."""
    reply = message_post(thread=thread, author=thread.session.owner, text=text).replies[0]
    system = request_for_reply(message=reply).system[0].text
    Message.objects.filter(pk=reply.pk).update(  # settled: the thread takes the next message
        status=MessageStatus.DONE, content=[{"type": "text", "text": "Noted."}]
    )
    return system


def settings_post(client, thread: Thread, **changes):
    """Save Session settings from `thread`, the way the dialog does."""
    session = thread.session
    form = client.get(reverse("chat:session_settings", kwargs={"session": session.public_id}))
    assert form.status_code == 200
    data = {
        "thread": str(thread.public_id), "credential": "", "model": "", "persona": session.persona,
        "persona_name": session.persona_name, "memory": session.memory,
        "memory_name": session.memory_name, "memory_format": "text",
        "addressing_mode": session.addressing_mode, "auto_rounds": 0, "turn_mode": "broadcast",
        "group_rules": "", "reply_length": "normal", "apply": "next", "roles": [
            link.role_id for link in session.session_roles.all()
        ], **changes,
    }  # fmt: skip
    response = client.post(
        reverse("chat:session_settings", kwargs={"session": session.public_id}),
        data,
        HTTP_HX_REQUEST="true",
    )
    assert response.status_code == 200, response.content.decode()[:500]


@pytest.fixture
def as_alice(alice):
    client = Client()
    client.force_login(alice)
    return client


def test_a_session_begins_with_version_one_and_its_thread_pins_it(alice_thread):
    versions = ContextVersion.objects.filter(session=alice_thread.session)
    assert sorted(versions.values_list("kind", "number")) == [("memory", 1), ("persona", 1)]
    assert alice_thread.memory_version.number == 1 and alice_thread.persona_version.number == 1


def test_a_change_is_a_version_and_older_chats_keep_theirs_until_they_take_the_latest(
    alice, alice_thread, as_alice
):
    session = alice_thread.session
    told(alice_thread, "first words")  # the chat has begun
    other = thread_create(session=session)
    told(other, "another chat")
    settings_post(
        as_alice, alice_thread, memory="Budget is small.", memory_name="Harbour notes",
        persona="I direct documentaries.", persona_name="Documentarian",
    )  # fmt: skip
    memory = ContextVersion.objects.get(session=session, kind="memory", number=2)
    assert (memory.text, memory.name, memory.author, memory.note) == (
        "Budget is small.", "Harbour notes", alice, "changed in the settings",
    )  # fmt: skip
    # The chat it was changed from takes it; the other chat goes on as it began.
    assert "Budget is small." in told(Thread.objects.get(pk=alice_thread.pk))
    other = Thread.objects.get(pk=other.pk)
    assert "Budget is small." not in told(other) and "documentaries" not in told(other)

    page = as_alice.get(reverse("chat:thread_detail", kwargs={"thread": other.public_id}))
    html = page.content.decode()
    assert "from before a later change" in html and "Use the latest" in html
    assert "the memory v1" in html and "the persona v1" in html
    as_alice.post(reverse("chat:thread_use_latest", kwargs={"thread": other.public_id}))
    other = Thread.objects.get(pk=other.pk)
    system = told(other)
    assert "Budget is small." in system and "I direct documentaries." in system
    page = as_alice.get(reverse("chat:thread_detail", kwargs={"thread": other.public_id}))
    assert "from before a later change" not in page.content.decode()


def test_new_chats_snapshot_the_latest_branches_keep_their_parents_and_empty_chats_follow(
    alice, alice_thread, as_alice
):
    session = alice_thread.session
    told(alice_thread)
    empty = thread_create(session=session)
    branch = thread_branch(thread=alice_thread, message=None)
    settings_post(as_alice, empty, memory="Shoot in March.")
    # The branch began from the parent's versions; the empty chat follows the change.
    assert Thread.objects.get(pk=branch.pk).memory_version.number == 1
    assert Thread.objects.get(pk=empty.pk).memory_version.number == 2
    fresh = thread_create(session=session)
    assert fresh.memory_version.number == 2 and "Shoot in March." in told(fresh)


def test_a_role_that_writes_memory_makes_a_version_its_chat_takes(alice, alice_thread):
    session = alice_thread.session
    told(alice_thread)
    bystander = thread_create(session=session)
    told(bystander)
    context = ToolContext(
        session_id=session.pk, thread_id=alice_thread.pk, reply_pk=0,
        role_handle="assistant", can_write=True,
    )  # fmt: skip
    run_tool(context, ToolCall("1", "update_memory", {"text": "Lisbon in May."}))
    version = ContextVersion.objects.get(session=session, kind="memory", number=2)
    assert (version.text, version.author_role, version.changed_by) == (
        "Lisbon in May.", "assistant", "@assistant",
    )  # fmt: skip
    assert Thread.objects.get(pk=alice_thread.pk).memory_version == version
    assert Thread.objects.get(pk=bystander.pk).memory_version.number == 1
    # Each chat's roles read the memory their chat is on.
    assert run_tool(context, ToolCall("2", "read_memory", {})) == "Lisbon in May."
    theirs = ToolContext(
        session_id=session.pk, thread_id=bystander.pk, reply_pk=0,
        role_handle="assistant", can_write=True,
    )  # fmt: skip
    assert run_tool(theirs, ToolCall("3", "read_memory", {})) == "The session memory is empty."


def test_the_history_shows_who_changed_what_and_restores_a_version(alice, alice_thread, as_alice):
    session = alice_thread.session
    told(alice_thread)
    settings_post(as_alice, alice_thread, memory="Budget is small.\nShoot in March.")
    settings_post(
        as_alice, alice_thread, memory="Budget is small.\nShoot in May.", memory_name="Plan"
    )
    url = reverse("chat:context_history", kwargs={"session": session.public_id, "kind": "memory"})
    html = as_alice.get(url + f"?thread={alice_thread.public_id}").content.decode()
    assert "v3 “Plan”" in html and "latest" in html and "this chat" in html
    assert "Renamed from “no name”" in html
    assert 'diff-del">- Shoot in March.' in html and 'diff-add">+ Shoot in May.' in html
    assert html.count("changed in the settings") == 2 and "alice" in html

    response = as_alice.post(
        reverse("chat:context_restore", kwargs={"session": session.public_id, "kind": "memory",
                                                "number": 2}),
        {"thread": str(alice_thread.public_id)},
    )  # fmt: skip
    assert response.status_code == 302
    restored = ContextVersion.objects.get(session=session, kind="memory", number=4)
    assert (restored.text, restored.note) == ("Budget is small.\nShoot in March.", "restored v2")
    assert "Shoot in March." in told(Thread.objects.get(pk=alice_thread.pk))
    again = as_alice.post(
        reverse("chat:context_restore", kwargs={"session": session.public_id, "kind": "memory",
                                                "number": 4}),
    )  # fmt: skip
    assert again.status_code == 409 and b"already the latest" in again.content
    missing = as_alice.post(
        reverse("chat:context_restore", kwargs={"session": session.public_id, "kind": "memory",
                                                "number": 99}),
    )  # fmt: skip
    assert missing.status_code == 409
    bad_kind = reverse("chat:context_history", kwargs={"session": session.public_id, "kind": "x"})
    assert as_alice.get(bad_kind).status_code == 404


def test_saving_unchanged_settings_makes_no_version_and_a_picked_persona_names_it(
    alice, alice_thread, as_alice
):
    session = alice_thread.session
    settings_post(as_alice, alice_thread)
    assert ContextVersion.objects.filter(session=session).count() == 2
    persona = Persona.objects.create(owner=alice, name="Showrunner", text="I run the room.")
    settings_post(as_alice, alice_thread, persona_pick=persona.pk, persona="")
    latest = ContextVersion.objects.get(session=session, kind="persona", number=2)
    assert (latest.name, latest.text) == ("Showrunner", "I run the room.")
