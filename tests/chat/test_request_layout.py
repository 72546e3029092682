"""The request layout that lets roles share Anthropic's prompt cache, and long transcripts."""

from __future__ import annotations

import json

import pytest

from apps.chat.council.posting import message_post
from apps.chat.council.requests import request_for_reply
from apps.chat.models import Message, MessageStatus, ThreadSummary
from apps.chat.records.messages import allocate_seqs
from apps.chat.records.sessions import session_set_provider
from apps.providers.adapters.translate import to_anthropic
from apps.providers.emulator import Script
from apps.roles.models import Role
from tests.conftest import wait_settled


def wire(message: Message) -> dict:
    return to_anthropic(request_for_reply(message=message))


@pytest.mark.django_db
def test_two_roles_in_one_turn_are_byte_identical_up_to_the_history_breakpoint(alice, alice_thread):
    message_post(thread=alice_thread, author=alice, text="@visual_architect first idea?")
    Message.objects.filter(thread=alice_thread, speaker="visual_architect").update(
        status=MessageStatus.DONE, content=[{"type": "text", "text": "A wide dawn shot."}]
    )
    posted = message_post(
        thread=alice_thread, author=alice, text="@editorial_architect @sound_designer your turn"
    )
    first, second = (wire(reply) for reply in posted.replies)
    assert first["tools"] == second["tools"] and first["tools"]
    assert first["system"] == second["system"]
    assert first["system"][-1]["cache_control"] == {"type": "ephemeral"}
    history_first, history_second = first["messages"][:-1], second["messages"][:-1]
    as_bytes = [json.dumps(h, sort_keys=True).encode() for h in (history_first, history_second)]
    assert as_bytes[0] == as_bytes[1]
    # The breakpoint sits on the last history block; the role's cue follows it and differs.
    assert history_first[-1]["content"][-1]["cache_control"] == {"type": "ephemeral"}
    assert first["messages"][-1] != second["messages"][-1]
    assert "You are @editorial_architect" in str(first["messages"][-1])
    # Speaker-labelled, role-neutral blocks.
    texts = [block["content"][0]["text"] for block in history_first]
    assert texts == [
        "[User]: @visual_architect first idea?",
        "[Visual Architect]: A wide dawn shot.",
        "[User]: @editorial_architect @sound_designer your turn",
    ]


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("stagger", [True, False])
def test_the_second_role_reads_the_cache_the_first_one_wrote(
    alice, anthropic_thread, celery_worker, emulator, settings, stagger
):
    settings.PARLEY_STAGGER_FANOUT = stagger
    # The emulator's cache entry is readable once the response writing it has begun: without
    # the stagger, the second call must arrive before that, even on a loaded machine.
    ttft = 200 if stagger else 2000
    emulator.script(
        *(
            Script(text=f"{h} answers.", ttft_ms=ttft, tokens_per_second=40, provider="anthropic")
            for h in ("a", "b")
        )
    )
    posted = message_post(
        thread=anthropic_thread, author=alice, text="@editorial_architect @visual_architect hi"
    )
    first, second = wait_settled(posted.replies)
    assert first.status == second.status == "done"
    assert first.usage["cache_write"] > 0
    if stagger:
        # Started once the first response had begun: the shared prefix is read, not rewritten.
        assert second.usage["cache_read"] >= first.usage["cache_write"]
        assert second.usage["cache_write"] == 0
    else:
        # Fired at the same instant, each call pays the cache write itself.
        assert second.usage["cache_read"] == 0
        assert second.usage["cache_write"] > 0


@pytest.mark.django_db(transaction=True)
def test_long_transcripts_are_summarised_once_in_the_request_and_never_deleted(
    alice, anthropic_thread, celery_worker, emulator, settings
):
    settings.PARLEY_SUMMARY_THRESHOLD_TOKENS = 1000
    thread = anthropic_thread
    old = [f"Old point {n}: " + "the harbour scene needs rain " * 12 for n in range(20)]
    seqs = allocate_seqs(thread, len(old))
    for seq, text in zip(seqs, old, strict=True):
        Message.objects.create(
            thread=thread,
            seq=seq,
            speaker="user" if seq % 2 else "director",
            content=[{"type": "text", "text": text}],
        )
    summary_script = Script(
        text="- The harbour scene needs rain.", match="Summarise the conversation now"
    )
    emulator.script(
        summary_script,
        Script(text="Noted.", match="You are @assistant", provider="anthropic"),
        Script(text="Agreed.", match="You are @director", provider="anthropic"),
        Script(text="Yes.", match="You are @visual_architect", provider="anthropic"),
    )
    posted = message_post(thread=thread, author=alice, text="Where are we?")
    wait_settled(posted.replies)
    role_request = next(r for r in emulator.requests if "You are @assistant" in str(r.body))
    blocks = [m["content"][0]["text"] for m in role_request.body["messages"]]
    assert blocks[0] == "[Summary of the earlier conversation]: - The harbour scene needs rain."
    assert not any(block.startswith("[User]: Old point 0:") for block in blocks)
    assert blocks[-2] == "[User]: Where are we?"  # recent messages follow verbatim
    assert ThreadSummary.objects.filter(thread=thread).count() == 1

    # The next turn, two roles at once, reuses the stored summary.
    posted = message_post(thread=thread, author=alice, text="@director @visual_architect and now?")
    wait_settled(posted.replies)
    summary_calls = [r for r in emulator.requests if "Summarise the conversation" in str(r.body)]
    assert len(summary_calls) == 1
    assert ThreadSummary.objects.filter(thread=thread).count() == 1
    assert (
        Message.objects.filter(thread=thread, content__0__text__startswith="Old point").count()
        == 20
    )


@pytest.mark.django_db
def test_per_role_model_and_credential_override(alice, alice_thread, emulated_anthropic):
    session = alice_thread.session
    session_set_provider(session=session, credential=emulated_anthropic, model="claude-haiku-4-5")
    director = session.session_roles.get(role__handle="director")
    director.model_override = "claude-opus-5"
    director.save()
    posted = message_post(thread=alice_thread, author=alice, text="@director @actor_agent go")
    models = {reply.speaker: (reply.provider, reply.model) for reply in posted.replies}
    assert models == {
        "director": ("anthropic", "claude-opus-5"),
        "actor_agent": ("anthropic", "claude-haiku-4-5"),
    }
    # A role can even use another credential than the session.
    from apps.providers.services import credential_save

    local = credential_save(
        owner=alice, name="Local", provider="openai_compatible",
        base_url="http://127.0.0.1:1/v1", api_key="",
    )  # fmt: skip
    actor = session.session_roles.get(role__handle="actor_agent")
    actor.credential, actor.model_override = local, "llama3.1"
    actor.save()
    Role.objects.filter(handle="director").update(model_override="")
    Message.objects.filter(thread=alice_thread).update(status="done")  # that turn has finished
    posted = message_post(thread=alice_thread, author=alice, text="@actor_agent again")
    assert (posted.replies[0].provider, posted.replies[0].model) == (
        "openai_compatible",
        "llama3.1",
    )
    assert posted.replies[0].credential == local
