"""The council's settings without a worker: group rules, output rules and reply length in the
request, the commands that change them, topic detection, the queue's views and Usage rates."""

from __future__ import annotations

import json

import pytest
from django.test import Client
from django.urls import reverse

from apps.chat.council.posting import message_post
from apps.chat.council.prompting import GROUP_RULES
from apps.chat.council.requests import request_for_reply
from apps.chat.council.topics import FOLLOW_UP, NEW_TOPIC, detect_topic
from apps.chat.models import (
    IN_FLIGHT,
    Message,
    MessageKind,
    QueuedMessage,
    Session,
    Thread,
    parse_reply_length,
    reply_words,
)
from apps.chat.selectors import round_state
from apps.providers.adapters.translate import to_anthropic
from apps.roles.models import Role

pytestmark = pytest.mark.django_db


def post(thread, text, *, finish_earlier=True):
    if finish_earlier:  # no worker here: the previous turn is taken as finished
        Message.objects.filter(thread=thread, status__in=IN_FLIGHT).update(status="done")
    return message_post(thread=thread, author=thread.session.owner, text=text)


def last_notice(thread) -> str:
    return Message.objects.filter(thread=thread, kind=MessageKind.NOTICE).last().text


def test_group_rules_output_rules_and_length_sit_where_the_cache_allows(alice_thread):
    session = alice_thread.session
    session.group_rules = "Speak like a film crew on set."
    session.reply_length = "short"
    session.save()
    Role.objects.filter(handle="visual_architect").update(output_rules="At most 3 bullets.")
    posted = post(alice_thread, "@visual_architect @sound_designer open?")
    visual, sound = (to_anthropic(request_for_reply(message=r)) for r in posted.replies)
    system = visual["system"][0]["text"]
    assert system.startswith("Speak like a film crew on set.") and GROUP_RULES not in system
    assert visual["system"] == sound["system"]  # the shared, cached block
    assert visual["messages"][:-1] == sound["messages"][:-1]
    cue = json.dumps(visual["messages"][-1])
    assert "At most 3 bullets." in cue and "under 150 words" in cue
    assert "At most 3 bullets." not in json.dumps(sound)
    # A per-message length wins for that turn only.
    per_message = post(alice_thread, "/length 40 @sound_designer one line?")
    (reply,) = per_message.replies
    assert "under 40 words" in json.dumps(
        to_anthropic(request_for_reply(message=reply))["messages"][-1]
    )
    assert Session.objects.get(pk=session.pk).reply_length == "short"


def test_blank_group_rules_mean_the_default(alice_thread):
    (reply,) = post(alice_thread, "hello").replies
    assert to_anthropic(request_for_reply(message=reply))["system"][0]["text"].startswith(
        GROUP_RULES
    )


@pytest.mark.parametrize(
    ("value", "stored", "words"),
    [("short", "short", 150), ("normal", "normal", 0), ("LONG", "long", 800),
     ("200", "200", 200), ("120 words", "120", 120)],
)  # fmt: skip
def test_reply_lengths_parse(value, stored, words):
    assert parse_reply_length(value) == stored and reply_words(stored) == words


@pytest.mark.parametrize("value", ["", "tiny", "5", "999999", "²", "-3", "1e3"])
def test_bad_reply_lengths_are_refused(value):
    with pytest.raises(ValueError, match="short, normal, long"):
        parse_reply_length(value)


def test_the_new_commands_change_the_session_and_say_so(alice_thread):
    post(alice_thread, "/mode sequential")
    session = Session.objects.get(pk=alice_thread.session_id)
    assert (session.turn_mode, session.addressing_mode) == ("sequential", "sticky")
    post(alice_thread, "/mode parallel")
    assert Session.objects.get(pk=session.pk).turn_mode == "broadcast"
    post(alice_thread, "/budget 5000 tokens")
    post(alice_thread, "/budget 2 min")
    post(alice_thread, '/budget stop "we agree"')
    session.refresh_from_db()
    assert (session.turn_token_budget, session.turn_time_limit, session.stop_phrase) == (
        5000, 120, "we agree",
    )  # fmt: skip
    assert "5,000 tokens, 120 s, stop phrase “we agree”" in last_notice(alice_thread)
    post(alice_thread, "/budget off")
    session.refresh_from_db()
    assert (session.turn_token_budget, session.turn_time_limit, session.stop_phrase) == (0, 0, "")
    post(alice_thread, "/length long")
    post(alice_thread, "/mentions on")
    session.refresh_from_db()
    assert (session.reply_length, session.ai_mentions) == ("long", True)
    help_text = post(alice_thread, "/help").notices[0].text
    for usage in ("/mode", "/budget", "/length", "/mentions", "/queue"):
        assert usage in help_text
    assert "AI mentions:** on" in help_text and "Reply length:** long" in help_text


@pytest.mark.parametrize(
    "text",
    ["/mode diagonal", "/budget lots", "/budget stop ", "/length enormous", "/mentions maybe",
     "/queue everything", "/length 3 hi"],
)  # fmt: skip
def test_bad_arguments_get_a_clear_error_and_change_nothing(alice_thread, text):
    from django.core.exceptions import ValidationError

    before = Session.objects.filter(pk=alice_thread.session_id).values().get()
    with pytest.raises(ValidationError):
        post(alice_thread, text)
    after = Session.objects.filter(pk=alice_thread.session_id).values().get()
    before.pop("updated_at"), after.pop("updated_at")
    assert before == after


def test_the_queue_command_lists_and_clears(alice_thread):
    post(alice_thread, "@visual_architect one")
    post(alice_thread, "two", finish_earlier=False)
    post(alice_thread, "three", finish_earlier=False)
    listed = message_post(thread=alice_thread, author=alice_thread.session.owner, text="/queue")
    assert "1. two" in listed.notices[0].text and "2. three" in listed.notices[0].text
    message_post(thread=alice_thread, author=alice_thread.session.owner, text="/queue clear")
    assert not QueuedMessage.objects.exists()


def test_a_queued_message_nobody_would_answer_is_refused_at_once(alice_thread):
    from django.core.exceptions import ValidationError

    post(alice_thread, "@visual_architect one")
    with pytest.raises(ValidationError, match="Nobody in this chat is called @ghost"):
        post(alice_thread, "@ghost hello?", finish_earlier=False)
    assert not QueuedMessage.objects.exists()


def test_the_sticky_role_belongs_to_the_thread_and_a_branch_starts_with_it(alice_thread):
    from apps.chat.records.threads import thread_branch, thread_create

    posted = post(alice_thread, "@sound_designer listen")
    other = thread_create(session=alice_thread.session)
    assert post(other, "hello").replies[0].speaker == "assistant"
    branch = thread_branch(thread=alice_thread, message=posted.replies[0])
    assert Thread.objects.get(pk=branch.pk).sticky_handle == "sound_designer"
    assert post(branch, "and now?").replies[0].speaker == "sound_designer"


def test_the_queue_views_are_scoped_to_the_owner(alice_thread, bob):
    post(alice_thread, "@visual_architect one")
    queued = post(alice_thread, "two", finish_earlier=False).queued
    client = Client()
    client.force_login(bob)
    for name in ("queued_send_now", "queued_edit", "queued_cancel"):
        url = reverse(f"chat:{name}", kwargs={"queued": queued.public_id})
        assert client.post(url, {"text": "hijack"}).status_code == 404
    assert QueuedMessage.objects.get(pk=queued.pk).text == "two"
    client.force_login(alice_thread.session.owner)
    url = reverse("chat:queued_edit", kwargs={"queued": queued.public_id})
    assert client.post(url, {"text": ""}, HTTP_HX_REQUEST="true").status_code == 422
    assert client.post(url, {"text": "two!"}, HTTP_HX_REQUEST="true").status_code == 204
    assert QueuedMessage.objects.get(pk=queued.pk).text == "two!"
    url = reverse("chat:queued_cancel", kwargs={"queued": queued.public_id})
    assert client.post(url, HTTP_HX_REQUEST="true").status_code == 204
    assert client.post(url, HTTP_HX_REQUEST="true").status_code == 404  # already gone


def test_the_thread_page_shows_the_queue_and_the_round_state(alice_thread):
    session = alice_thread.session
    session.auto_rounds = 2
    session.save()
    post(alice_thread, "@all go")
    post(alice_thread, "a <b>follow-up</b>", finish_earlier=False)
    state = round_state(thread=alice_thread)
    assert (state.round, state.rounds) == (0, 2)
    client = Client()
    client.force_login(session.owner)
    html = client.get(reverse("chat:thread_detail", kwargs={"thread": alice_thread.public_id}))
    body = html.content.decode()
    assert "Then 2 auto-rounds" in body
    assert "Queued — sent when the current turn finishes" in body
    assert "a &lt;b&gt;follow-up&lt;/b&gt;" in body and "<b>follow-up" not in body
    assert "Send now" in body


TOPICS = [
    # text, earlier, expected mode, offered a new chat
    ("hello", [], NEW_TOPIC, False),
    ("By the way, a separate question: how do I export?", ["The harbour scene opens at dawn."],
     NEW_TOPIC, True),
    ("Can you make it shorter?", ["The harbour scene opens at dawn."], FOLLOW_UP, False),
    ("It needs more fog.", ["The harbour scene opens at dawn."], FOLLOW_UP, False),
    ("ok", ["The harbour scene opens at dawn."], FOLLOW_UP, False),
    ("The harbour scene at dawn needs the bell to ring twice before the fog lifts slowly",
     ["The harbour scene opens at dawn with a bell and fog."], FOLLOW_UP, False),
    ("Please draft a quarterly budget spreadsheet for marketing expenses including software "
     "licences", ["The harbour scene opens at dawn with a bell and fog."], NEW_TOPIC, True),
]  # fmt: skip


@pytest.mark.parametrize(("text", "earlier", "mode", "offer"), TOPICS)
def test_topic_detection(text, earlier, mode, offer):
    topic = detect_topic(text, earlier=earlier)
    assert (topic.mode, topic.offers_new_chat) == (mode, offer)
    assert 0 <= topic.confidence <= 1


def test_a_new_topic_is_stored_and_offers_a_new_chat(alice_thread):
    post(alice_thread, "The harbour scene opens at dawn with a bell.")
    posted = post(alice_thread, "Unrelated: what is a good name for a cat?")
    message = Message.objects.get(pk=posted.user_message.pk)
    assert message.topic["mode"] == NEW_TOPIC and message.topic["offer"] is True
    client = Client()
    client.force_login(alice_thread.session.owner)
    page = client.get(reverse("chat:thread_detail", kwargs={"thread": alice_thread.public_id}))
    assert "Start a new chat with this message" in page.content.decode()
    url = reverse("chat:message_new_chat", kwargs={"message": message.public_id})
    response = client.post(url, HTTP_HX_REQUEST="true")
    new_thread = Thread.objects.exclude(pk=alice_thread.pk).get()
    assert response["HX-Redirect"] == f"/t/{new_thread.public_id}/"
    assert Message.objects.get(thread=new_thread, speaker="user").text == message.text


def test_admin_usage_shows_truncation_recovery_and_cache_hits(admin_client, alice_thread):
    posted = post(alice_thread, "@all go")
    replies = posted.replies
    usage = {"input": 100, "output": 10, "cache_read": 300, "cache_write": 0}
    Message.objects.filter(pk__in=[r.pk for r in replies]).update(
        status="done", finished_at="2026-01-01T00:00:00Z", usage=usage, stop_reason="end"
    )
    Message.objects.filter(pk=replies[0].pk).update(continuations=2)  # recovered
    Message.objects.filter(pk=replies[1].pk).update(continuations=3, stop_reason="max_tokens")
    body = admin_client.get(reverse("admin:chat_messageusage_changelist")).content.decode()
    assert "truncated: <strong>33 %</strong> (2 replies" in body
    assert "recovered by continuation: <strong>50 %</strong> (1 still cut off" in body
    assert "Cache hits: <strong>75 %</strong>" in body


def test_the_settings_dialog_sets_the_conversation(alice_thread):
    from apps.chat.web.forms import SessionSettingsForm
    from apps.providers.selectors import credentials_for_user

    session = alice_thread.session
    roles = {r.handle: r for r in Role.objects.filter(handle__in=["director", "sound_designer",
                                                                  "visual_architect"])}  # fmt: skip
    data = {
        "credential": "", "model": "", "persona": "", "memory": "",
        "addressing_mode": "sticky", "auto_rounds": "2", "turn_mode": "sequential",
        "reply_length": "120 words", "turn_token_budget": "9000", "turn_time_limit": "90",
        "stop_phrase": "  we   agree ", "ai_mentions": "on",
        "group_rules": "Be a film crew.", "roles": [str(r.pk) for r in roles.values()],
        f"order_{roles['sound_designer'].pk}": "1", f"order_{roles['visual_architect'].pk}": "2",
        f"order_{roles['director'].pk}": "3",
    }  # fmt: skip
    form = SessionSettingsForm(
        data, session=session, credentials=credentials_for_user(user=session.owner)
    )
    assert form.is_valid(), form.errors
    from apps.chat.council.lifecycle import session_apply_settings

    session_apply_settings(session=session, change=form.change(), apply_now=False)
    session.refresh_from_db()
    assert session.round_order[:2] == ["sound_designer", "visual_architect"]
    assert (session.turn_mode, session.reply_length, session.turn_token_budget) == (
        "sequential", "120", 9000,
    )  # fmt: skip
    assert (session.turn_time_limit, session.stop_phrase, session.ai_mentions) == (
        90,
        "we agree",
        True,
    )
    assert session.group_rules == "Be a film crew."
    from apps.chat.council.rounds import round_order

    assert [r.handle for r in round_order(session)] == [
        "sound_designer",
        "visual_architect",
        "director",
    ]
    # Emptied group rules fall back to the default; a bad length is refused.
    data.update(group_rules="", reply_length="huge")
    form = SessionSettingsForm(
        data, session=session, credentials=credentials_for_user(user=session.owner)
    )
    assert not form.is_valid() and "reply_length" in form.errors
    data.update(reply_length="short")
    form = SessionSettingsForm(
        data, session=session, credentials=credentials_for_user(user=session.owner)
    )
    assert form.is_valid() and form.change().group_rules == ""
