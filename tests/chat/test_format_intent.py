"""Format by intent: rules tell a list, a comparison, an explanation, code or a short answer
apart, and the matching rule goes in the reply's final instruction (after the cached
prefix) — unless the person set a reply length. Tested with the shipped roles as they are:
each has output rules, which stay and win where the two differ."""

from __future__ import annotations

import pytest

from apps.chat.council.intent import FORMAT_RULES, ROLE_RULES_WIN, intent_of
from apps.chat.council.posting import message_post
from apps.chat.council.requests import request_for_reply
from apps.roles.models import Role

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    ("text", "intent"),
    [
        ("Give me 5 ideas for the opening shot", "list"),
        ("@director what are some options for the title?", "list"),
        ("Compare the 35mm and the 50mm lens for the chase", "comparison"),
        ("steadicam vs dolly for this scene?", "comparison"),
        ("Write a python function that parses the call sheet", "code"),
        ("Why does the second act drag?", "explanation"),
        ("Explain how the cut points work here", "explanation"),
        ("Is the harbour scene at night?", "short"),
        ("@visual_architect who lights the set?", "short"),
        ("I love the harbour and the gulls and the long quiet morning light.", ""),
    ],
)
def test_the_rules_tell_the_shapes_apart(text, intent):
    assert intent_of(text) == intent


def instruction(request) -> str:
    return request.messages[-1].parts[0]["text"]


@pytest.mark.parametrize("handle", ["assistant", "director", "visual_architect"])
def test_the_matching_rule_goes_in_the_final_instruction_with_the_roles_own(
    handle, alice_thread, alice
):
    role = Role.objects.get(handle=handle)
    assert role.output_rules  # the shipped role, as it ships
    posted = message_post(thread=alice_thread, author=alice, text=f"@{handle} list 5 lens ideas")
    request = request_for_reply(message=posted.replies[0])
    said = instruction(request)
    assert FORMAT_RULES["list"] in said and ROLE_RULES_WIN in said
    assert role.output_rules in said  # the role's rules stay, beside it
    assert request.metadata["format"] == "list"
    assert FORMAT_RULES["list"] not in str(request.system)  # after the cached prefix


def test_no_format_rule_when_a_length_is_set(alice_thread, alice):
    posted = message_post(
        thread=alice_thread, author=alice, text="/length short @director list ideas"
    )
    request = request_for_reply(message=posted.replies[0])
    assert FORMAT_RULES["list"] not in instruction(request) and "format" not in request.metadata


@pytest.mark.django_db(transaction=True)
def test_when_the_rules_are_unsure_the_cheap_model_reads_the_turn_once(
    alice, anthropic_thread, celery_worker, emulator
):
    import json

    from apps.providers.emulator import Script
    from tests.conftest import wait_settled

    emulator.script(
        Script(text="comparison", match="Classify the shape"),
        Script(text="A table.", match="You are @assistant "),
        Script(text="Another table.", match="You are @editorial_architect "),
    )
    text = "@assistant @editorial_architect tell me about the harbour at night for the ending"
    assert intent_of(text) == ""  # the rules are unsure
    replies = wait_settled(message_post(thread=anthropic_thread, author=alice, text=text).replies)
    asked = [r for r in emulator.requests if "Classify the shape" in json.dumps(r.body)]
    assert len(asked) == 1 and asked[0].body["model"] == "claude-haiku-4-5"
    roles = [r for r in emulator.requests if r not in asked]
    assert len(roles) == 2
    assert all(FORMAT_RULES["comparison"] in json.dumps(r.body) for r in roles)
    assert all(ROLE_RULES_WIN in json.dumps(r.body) for r in roles)  # shipped roles' rules
    for reply in replies:
        notes = [entry.get("detail", "") for entry in reply.log if entry["event"] == "format"]
        assert notes == ["asked for comparison (the cheap model's reading)"], reply.log

    # A message the rules are sure of, or a remark, asks nothing of the cheap model.
    emulator.reset()
    for remark in ("@assistant list 5 lens ideas", "@assistant lovely, thanks"):
        wait_settled(message_post(thread=anthropic_thread, author=alice, text=remark).replies)
    assert not [r for r in emulator.requests if "Classify the shape" in json.dumps(r.body)]
