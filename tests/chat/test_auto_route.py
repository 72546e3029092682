"""Auto-route (opt-in): a message without a mention that would go to the default role goes
to the role whose description it matches clearly best; the message says so; one click undoes
it."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from apps.chat.council.posting import message_post
from apps.chat.display.bubbles import render_bubbles
from apps.chat.models import Message, Thread
from apps.roles.routing import best_placed

pytestmark = pytest.mark.django_db

FILM = {
    "assistant": "A neutral stage manager: app help, routing, analysis.",
    "editorial_architect": "Structure, pacing, rhythm and cut points.",
    "visual_architect": "Framing, light, colour, camera movement and production design.",
    "sound_designer": "Soundscape, music, silence and the mix.",
}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("How should we light the harbour at night?", ("visual_architect", "light")),
        ("What music goes under the chase?", ("sound_designer", "music")),
        ("Is the pacing of act two too slow?", ("editorial_architect", "pacing")),
        ("hello there", None),
        ("The music and the lighting: which first?", None),  # a tie: nobody clearly
    ],
)
def test_the_best_placed_role_is_the_one_its_words_clearly_match(text, expected):
    assert best_placed(text, descriptions=FILM, exclude="assistant") == expected


@pytest.fixture
def routed_thread(alice_thread):
    session = alice_thread.session
    session.auto_route = True
    session.save()
    return alice_thread


def test_an_unaddressed_message_goes_to_the_best_placed_role_and_says_so(routed_thread, alice):
    posted = message_post(
        thread=routed_thread, author=alice, text="How should we light the harbour?"
    )
    assert [reply.speaker for reply in posted.replies] == ["visual_architect"]
    message = Message.objects.get(pk=posted.user_message.pk)
    assert message.routed == {"to": "visual_architect", "from": "assistant", "reason": "light"}
    assert Thread.objects.get(pk=routed_thread.pk).sticky_handle == ""  # the default triages on
    html = str(render_bubbles([message]))
    assert "→ @visual_architect" in html and "(light)" in html and "Ask @assistant instead" in html


@pytest.mark.parametrize(
    "text", ["@director how should we light it?", "hello", "light it, @sound_designer"]
)
def test_a_mention_or_nothing_clear_leaves_the_route_alone(routed_thread, alice, text):
    posted = message_post(thread=routed_thread, author=alice, text=text)
    assert not Message.objects.get(pk=posted.user_message.pk).routed
    assert "visual_architect" not in [reply.speaker for reply in posted.replies]


def test_auto_route_is_off_unless_the_session_turns_it_on(alice_thread, alice):
    posted = message_post(thread=alice_thread, author=alice, text="How should we light it?")
    assert [reply.speaker for reply in posted.replies] == ["assistant"]
    assert message_post(thread=alice_thread, author=alice, text="/autoroute on").notices
    alice_thread.session.refresh_from_db()
    assert alice_thread.session.auto_route


def test_undo_sends_the_message_to_the_default_role_instead(routed_thread, alice):
    posted = message_post(thread=routed_thread, author=alice, text="How should we light it?")
    client = Client()
    client.force_login(alice)
    url = reverse("chat:message_unroute", kwargs={"message": posted.user_message.public_id})
    assert client.post(url, HTTP_HX_REQUEST="true").status_code == 204
    again = Message.objects.filter(thread=routed_thread, speaker="user").order_by("-seq").first()
    assert again.text == "@assistant How should we light it?"
    assert Message.objects.filter(turn__user_message=again).get().speaker == "assistant"
    original = Message.objects.get(pk=posted.user_message.pk)
    assert original.routed["undone"] is True
    assert "sent to @assistant instead" in str(render_bubbles([original]))
    assert client.post(url, HTTP_HX_REQUEST="true").status_code == 409  # once
