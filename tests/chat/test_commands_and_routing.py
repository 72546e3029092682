"""Posting routes by mention; slash commands answer with notices that models never see."""

from __future__ import annotations

import re

import pytest
from django.core.exceptions import ValidationError
from django.test import Client
from django.urls import reverse

from apps.chat.council.posting import message_post
from apps.chat.council.requests import request_for_reply
from apps.chat.models import IN_FLIGHT, Message, MessageKind, Stage, Thread
from apps.chat.records.sessions import session_set_roles

pytestmark = pytest.mark.django_db


def post(thread, text):
    """Post as if the previous turn had finished (no worker runs here): nothing queues."""
    Message.objects.filter(thread=thread, status__in=IN_FLIGHT).update(status="done")
    return message_post(thread=thread, author=thread.session.owner, text=text)


def speakers(posted):
    return [reply.speaker for reply in posted.replies]


def test_mentions_route_with_the_director_last_and_sticky_follow_ups(alice_thread):
    posted = post(alice_thread, "@Director and @visual_architect: the opening?")
    assert speakers(posted) == ["visual_architect", "director"]
    assert [r.stage for r in posted.replies] == [Stage.PARALLEL, Stage.LAST]
    assert Thread.objects.get(pk=alice_thread.pk).sticky_handle == "visual_architect"
    assert speakers(post(alice_thread, "and the colour?")) == ["visual_architect"]
    assert speakers(post(alice_thread, "mail me at bob@director.example")) == ["visual_architect"]
    assert speakers(post(alice_thread, "@all-creatives thoughts?")) == [
        "editorial_architect", "visual_architect", "sound_designer", "actor_agent", "director",
    ]  # fmt: skip
    assert len(post(alice_thread, "@all hello").replies) == 6


def test_unknown_handles_are_reported_and_known_targets_still_answer(alice_thread):
    posted = post(alice_thread, "@sound_designr @actor_agent listen")
    assert speakers(posted) == ["actor_agent"]
    (notice,) = posted.notices
    assert notice.kind == MessageKind.NOTICE
    assert "Nobody in this chat is called @sound_designr" in notice.text
    with pytest.raises(ValidationError, match="Nobody in this chat is called @nobody"):
        post(alice_thread, "@nobody are you there?")
    assert not Message.objects.filter(content__0__text="@nobody are you there?").exists()


def test_mute_and_unmute_skip_a_role_and_say_so(alice_thread):
    post(alice_thread, "/mute @sound_designer")
    posted = post(alice_thread, "@all hello")
    assert "sound_designer" not in speakers(posted) and len(posted.replies) == 5
    posted = post(alice_thread, "@sound_designer @director hello")
    assert speakers(posted) == ["director"]
    assert "@sound_designer is muted" in posted.notices[0].text
    post(alice_thread, "/unmute @sound_designer")
    assert "sound_designer" in speakers(post(alice_thread, "@all again"))


def test_mode_rounds_rename_help_new_and_retry(alice_thread):
    session = alice_thread.session
    post(alice_thread, "/mode broadcast")
    assert len(post(alice_thread, "everyone?").replies) == 6
    post(alice_thread, "/mode sticky")
    assert "at least two unmuted" not in post(alice_thread, "/rounds 3").notices[0].text
    session.refresh_from_db()
    assert (session.addressing_mode, session.auto_rounds) == ("sticky", 3)
    with pytest.raises(ValidationError, match="from 0 to 10"):
        post(alice_thread, "/rounds 99")
    post(alice_thread, "/rename Harbour <script>alert(1)</script>")
    alice_thread.refresh_from_db()
    assert alice_thread.label == "Harbour <script>alert(1)</script>"
    help_text = post(alice_thread, "/help").notices[0].text
    for name in ("/help", "/mute", "/unmute", "/mode", "/rounds", "/new", "/rename", "/retry"):
        assert name in help_text
    assert "Nothing to retry" in post(alice_thread, "/retry").notices[0].text
    moved = post(alice_thread, "/new")
    assert moved.redirect_to is not None and moved.redirect_to != alice_thread
    with pytest.raises(ValidationError, match=r"There is no /frobnicate command\. Try /help"):
        post(alice_thread, "/frobnicate now")
    # A path is not a command, and // escapes a leading slash.
    assert post(alice_thread, "/usr/bin is full").user_message.text == "/usr/bin is full"
    assert post(alice_thread, "//help me").user_message.text == "/help me"


def test_notices_are_never_sent_to_models(alice_thread):
    post(alice_thread, "/help")
    posted = post(alice_thread, "@nobody @director hi")
    request = request_for_reply(message=posted.replies[0])
    sent = str(request.messages)
    assert "Commands" not in sent and "Nobody in this chat" not in sent


def test_the_composer_keeps_the_text_of_a_failed_command(alice, alice_thread):
    client = Client()
    client.force_login(alice)
    url = reverse("chat:message_create", kwargs={"thread": alice_thread.public_id})
    response = client.post(url, {"text": "/mute @ghost"}, HTTP_HX_REQUEST="true")
    assert response.status_code == 422
    body = response.content.decode()
    assert "Nobody in this chat is called @ghost" in body and "/mute @ghost</textarea>" in body
    response = client.post(url, {"text": "/new"}, HTTP_HX_REQUEST="true")
    assert response.status_code == 200 and response["HX-Redirect"].startswith("/t/")


def test_a_mute_answers_with_the_muted_chip_before_any_socket_follows(alice, alice_thread):
    """The person who mutes sees it at once, even from a tab whose socket has not yet synced
    (the push to the session's tabs went out before it followed)."""
    client = Client()
    client.force_login(alice)
    url = reverse("chat:message_create", kwargs={"thread": alice_thread.public_id})
    body = client.post(url, {"text": "/mute @sound_designer"}, HTTP_HX_REQUEST="true").content
    picker = body.decode().split('id="role-picker"', 1)[1]
    assert re.search(r'chip--muted[^"]*"[^>]*data-handle="sound_designer"', picker)
    body = client.post(url, {"text": "/help"}, HTTP_HX_REQUEST="true").content.decode()
    assert 'id="role-picker"' not in body  # a command that changes nothing renders no controls


def test_rerun_is_scoped_to_the_owner(alice_thread, bob):
    posted = post(alice_thread, "hello")
    Message.objects.filter(pk=posted.replies[0].pk).update(status="error")
    url = reverse("chat:message_rerun", kwargs={"message": posted.replies[0].public_id})
    client = Client()
    client.force_login(bob)
    assert client.post(url).status_code == 404
    client.force_login(alice_thread.session.owner)
    assert client.post(url, HTTP_HX_REQUEST="true").status_code == 204
    assert client.post(url, HTTP_HX_REQUEST="true").status_code == 409  # already running


def test_rounds_warns_when_too_few_roles_can_take_part(alice_thread):
    from apps.roles.models import Role

    session_set_roles(session=alice_thread.session, roles=[Role.objects.get(handle="assistant")])
    assert "at least two unmuted roles" in post(alice_thread, "/rounds 2").notices[0].text
