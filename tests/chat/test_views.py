"""Every page needs a login; the owner works, everybody else gets 404; bad input loses nothing."""

import re

import pytest
from django.test import Client
from django.urls import reverse

from apps.chat.models import Message, MessageStatus, Session
from tests.conftest import FILM_CREW, wait_settled


@pytest.fixture
def as_alice(client, alice):
    client.force_login(alice)
    return client


@pytest.fixture
def as_bob(bob):
    client = Client()
    client.force_login(bob)
    return client


@pytest.fixture
def thread_urls(alice_thread):
    thread = alice_thread.public_id
    session = alice_thread.session.public_id
    return {
        "get": [
            reverse("chat:thread_detail", kwargs={"thread": thread}),
            reverse("chat:session_detail", kwargs={"session": session}),
        ],
        "post": [
            reverse("chat:message_create", kwargs={"thread": thread}),
            reverse("chat:thread_interrupt", kwargs={"thread": thread}),
            reverse("chat:thread_create", kwargs={"session": session}),
        ],
    }


def test_pages_require_a_login(client, thread_urls):
    for url in [reverse("chat:session_list"), *thread_urls["get"]]:
        response = client.get(url)
        assert response.status_code == 302
        assert response["Location"].startswith(reverse("login"))


def test_the_owner_sees_the_thread_page(as_alice, alice_thread):
    response = as_alice.get(
        reverse("chat:thread_detail", kwargs={"thread": alice_thread.public_id})
    )
    assert response.status_code == 200
    body = response.content.decode()
    assert f'ws-connect="/ws/threads/{alice_thread.public_id}/"' in body
    assert 'aria-label="Message"' in body


def test_strangers_get_404_for_every_url(as_bob, thread_urls, alice_thread):
    for url in thread_urls["get"]:
        assert as_bob.get(url).status_code == 404, url
    for url in thread_urls["post"]:
        assert as_bob.post(url, {"text": "hi"}).status_code == 404, url
    assert not Message.objects.filter(thread=alice_thread).exists()


def test_the_session_list_shows_only_my_sessions(
    as_alice, alice_session, bob, django_assert_max_num_queries
):
    Session.objects.create(owner=bob, name="Bob's secret plans")
    # The list, and the create dialog's credentials, personas, roles, default roles, servers.
    with django_assert_max_num_queries(9):
        response = as_alice.get(reverse("chat:session_list"))
    assert "Alice&#x27;s session" in response.content.decode()
    assert "Bob" not in response.content.decode()


def test_csrf_is_enforced_on_posts(alice, alice_thread):
    client = Client(enforce_csrf_checks=True)
    client.force_login(alice)
    url = reverse("chat:message_create", kwargs={"thread": alice_thread.public_id})
    assert client.post(url, {"text": "hello"}).status_code == 403
    assert client.post(reverse("chat:session_create"), {"name": "x"}).status_code == 403
    assert not Message.objects.exists()


def test_creating_a_session_opens_its_first_thread(as_alice, roles):
    response = as_alice.post(reverse("chat:session_create"), {"name": "Film night"})
    session = Session.objects.get(name="Film night")
    assert response["Location"] == reverse(
        "chat:thread_detail", kwargs={"thread": session.active_thread.public_id}
    )
    handles = session.session_roles.order_by("role__sort_order").values_list(
        "role__handle", flat=True
    )
    assert list(handles) == FILM_CREW


@pytest.mark.django_db(transaction=True)
def test_posting_saves_the_message_and_queues_a_reply(
    as_alice, alice_thread, celery_worker, fast_demo
):
    url = reverse("chat:message_create", kwargs={"thread": alice_thread.public_id})
    response = as_alice.post(url, {"text": "Hello *council*"}, HTTP_HX_REQUEST="true")
    assert response.status_code == 200
    body = response.content.decode()
    assert '<div id="transcript" hx-swap-oob="beforeend">' in body
    user_message, reply = Message.objects.filter(thread=alice_thread).order_by("seq")
    # The reply's bubble as it was when the answer was rendered: waiting, or already claimed
    # by the worker (a quick one, under load, gets there first).
    assert re.search(rf'id="msg-{reply.public_id}"[^>]*data-status="(queued|streaming|done)"', body)
    assert user_message.text == "Hello *council*"
    assert (reply.speaker, reply.provider) == ("assistant", "demo")
    (reply,) = wait_settled([reply])  # and the queued reply is answered
    assert reply.status == MessageStatus.DONE and reply.text


@pytest.mark.parametrize(
    ("text", "error"),
    [("", "Write something before sending."), ("   \n ", "Write something before sending.")],
)
def test_an_empty_message_is_refused_clearly(as_alice, alice_thread, text, error):
    url = reverse("chat:message_create", kwargs={"thread": alice_thread.public_id})
    response = as_alice.post(url, {"text": text}, HTTP_HX_REQUEST="true")
    assert response.status_code == 422
    assert error in response.content.decode()
    assert not Message.objects.exists()


def test_a_huge_message_is_refused_and_the_text_is_kept(as_alice, alice_thread, settings):
    settings.PARLEY_MAX_MESSAGE_CHARS = 1000
    text = "long story " * 200
    url = reverse("chat:message_create", kwargs={"thread": alice_thread.public_id})
    response = as_alice.post(url, {"text": text}, HTTP_HX_REQUEST="true")
    assert response.status_code == 422
    body = response.content.decode()
    assert "the limit is 1,000" in body
    assert text.strip() in body  # still in the textarea, nothing lost
    assert not Message.objects.exists()


def test_hostile_html_in_a_message_is_rendered_as_text(as_alice, alice_thread):
    from apps.chat.council.posting import message_post

    message_post(
        thread=alice_thread, author=alice_thread.session.owner, text="<script>alert('x')</script>"
    )
    response = as_alice.get(
        reverse("chat:thread_detail", kwargs={"thread": alice_thread.public_id})
    )
    body = response.content.decode()
    assert "<script>alert(" not in body
    assert "&lt;script&gt;alert(" in body, body[body.find('id="transcript"') :][:1500]


def test_login_page_has_labelled_fields(client):
    body = client.get(reverse("login")).content.decode()
    assert ">Username</label>" in body and ">Password</label>" in body
    assert ">Log in</button>" in body
