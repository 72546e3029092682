"""Sharing a thread by link: the owner makes a read-only link (up to a message, or following
it live; expiring), anyone with it reads the thread without logging in, and a whisper, the
persona, the memory and the credentials never appear — on the page or in what it loads."""

from __future__ import annotations

import re
from datetime import timedelta
from html.parser import HTMLParser

import pytest
from django.contrib.staticfiles import finders
from django.test import Client
from django.utils import timezone

from apps.chat.council.posting import message_post
from apps.chat.display.markdown import ALLOWED_TAGS
from apps.chat.models import Message, MessageStatus, Session, SharedLink
from apps.chat.records.rooms import member_add
from apps.chat.records.sessions import session_set_provider
from apps.providers.services import credential_save
from apps.roles.models import Role
from tests.chat.test_rendering import HOSTILE

pytestmark = pytest.mark.django_db

SECRETS = ("zanzibar", "PERSONA-SECRET-7", "MEMORY-SECRET-9", "sk-ant-secret")


def settle(messages, text):
    for message in messages:
        Message.objects.filter(pk=message.pk).update(
            status=MessageStatus.DONE, content=[{"type": "text", "text": text}],
            finished_at=timezone.now(),
        )  # fmt: skip


@pytest.fixture
def shared_room(alice, bob, alice_thread):
    session = alice_thread.session
    Session.objects.filter(pk=session.pk).update(
        persona="I am PERSONA-SECRET-7", memory="remember MEMORY-SECRET-9"
    )
    # The session's key, planted so its absence from the page means something.
    key = credential_save(owner=alice, name="Anthropic", provider="anthropic",
                          api_key="sk-ant-secret-0123456789abcdef")  # fmt: skip
    session_set_provider(session=Session.objects.get(pk=session.pk), credential=key,
                         model="claude-sonnet-4-5")  # fmt: skip
    member_add(session=session, by=alice, username="bob")
    first = message_post(thread=alice_thread, author=alice, text="@director what is the plan?")
    settle(first.replies, "We shoot at dawn.")
    whisper = message_post(
        thread=alice_thread, author=bob, text="/whisper @director @alice zanzibar"
    )
    settle(whisper.replies, "zanzibar noted, quietly.")
    later = message_post(thread=alice_thread, author=alice, text="@director and after that?")
    settle(later.replies, "We edit until noon.")
    return alice_thread


def client_for(user=None) -> Client:
    client = Client()
    if user is not None:
        client.force_login(user)
    return client


def make_link(owner, thread, *, up_to="live", expires="7") -> str:
    form = {"up_to": up_to, "expires": expires}
    response = client_for(owner).post(f"/t/{thread.public_id}/share/", form)
    assert response.status_code == 200, response.content[:400]
    page = response.content.decode()
    (url,) = re.findall(r'>(http://testserver/shared/[^<"/]+/)</textarea>', page)
    return url.removeprefix("http://testserver")


def assets_of(page: str) -> list[str]:
    """The text of every script and stylesheet the page loads."""
    found = []
    for src in re.findall(r'<(?:script[^>]+src|link[^>]+href)="([^"]+)"', page):
        path = finders.find(src.removeprefix("/static/").split("?")[0])
        assert path, f"{src} is not one of Parley's static files"
        with open(path, encoding="utf-8") as handle:
            found.append(handle.read())
    return found


def test_anyone_with_the_link_reads_the_thread_and_nothing_private(shared_room, alice):
    path = make_link(alice, shared_room)
    response = client_for().get(path)
    assert response.status_code == 200
    page = response.content.decode()
    assert response["X-Robots-Tag"] == "noindex, nofollow"
    assert '<meta name="robots" content="noindex, nofollow">' in page
    assert response["Referrer-Policy"] == "no-referrer"
    assert "default-src 'none'" in response["Content-Security-Policy"]
    director = Role.objects.get(handle="director")
    assert director.display_name in page and director.colour in page
    assert "We shoot at dawn." in page and "We edit until noon." in page
    assert Session.objects.get(pk=shared_room.session_id).credential is not None  # planted
    for text in [page, *assets_of(page)]:
        for secret in SECRETS:
            assert secret not in text, secret
    assert SharedLink.objects.get().views == 1


def test_a_link_up_to_a_message_shows_nothing_after_it(shared_room, alice):
    first_reply = Message.objects.filter(thread=shared_room, speaker="director").order_by("seq")[0]
    path = make_link(alice, shared_room, up_to=str(first_reply.public_id))
    page = client_for().get(path).content.decode()
    assert "We shoot at dawn." in page and "and after that?" not in page
    # It does not grow: the page polls nothing.
    assert "hx-trigger" not in page


def test_a_live_link_shows_what_comes_next(shared_room, alice):
    path = make_link(alice, shared_room)
    posted = message_post(thread=shared_room, author=alice, text="@director one more thing")
    polled = client_for().get(path + "transcript/").content.decode()
    assert "one more thing" in polled and "writing…" in polled
    settle(posted.replies, "Wrap at six.")
    assert "Wrap at six." in client_for().get(path + "transcript/").content.decode()


def test_a_revoked_or_expired_link_is_a_404(shared_room, alice):
    revoked, expired = make_link(alice, shared_room), make_link(alice, shared_room, expires="1")
    link = SharedLink.objects.order_by("pk").first()
    response = client_for(alice).post(f"/account/shared/{link.public_id}/revoke/")
    assert response.status_code == 302
    SharedLink.objects.filter(pk=SharedLink.objects.order_by("pk").last().pk).update(
        expires_at=timezone.now() - timedelta(seconds=1)
    )
    for path in (revoked, expired):
        for suffix in ("", "transcript/"):
            response = client_for().get(path + suffix)
            assert response.status_code == 404, (path, suffix)
            assert "We shoot at dawn." not in response.content.decode()
    assert client_for().get("/shared/not-a-token/").status_code == 404


def test_only_the_owner_shares_and_sees_their_links(shared_room, alice, bob, charlie):
    share = f"/t/{shared_room.public_id}/share/"
    assert client_for(bob).post(share, {"up_to": "live"}).status_code == 403
    assert client_for(charlie).get(f"/t/{shared_room.public_id}/share/").status_code == 404
    path = make_link(alice, shared_room)
    client_for().get(path)
    client_for().get(path)
    listing = client_for(alice).get("/account/shared/").content.decode()
    assert "2 views" in listing and path in listing
    assert path not in client_for(bob).get("/account/shared/").content.decode()
    link = SharedLink.objects.get()
    assert client_for(bob).post(f"/account/shared/{link.public_id}/revoke/").status_code == 404
    assert SharedLink.objects.get().revoked_at is None
    # A whisper cannot be a link's last message.
    whisper = Message.objects.filter(thread=shared_room, private=True).first()
    refused = client_for(alice).post(share, {"up_to": str(whisper.public_id)})
    assert refused.status_code == 422 and "not a whisper" in refused.content.decode()


class Elements(HTMLParser):
    def __init__(self):
        super().__init__()
        self.found: list[tuple[str, dict]] = []

    def handle_starttag(self, tag, attrs):
        self.found.append((tag, dict(attrs)))


PAGE_TAGS = {"html", "head", "meta", "title", "style", "body", "main", "h1", "p", "div", "article",
             "header", "span", "time", "img", "ul", "li", "a", "script"}  # fmt: skip


def test_the_shared_page_passes_the_xss_corpus(alice, alice_thread, roles):
    Role.objects.filter(handle="director").update(display_name=f"Dir {HOSTILE[1]}", icon="<b>")
    alice_thread.label = HOSTILE[0]
    alice_thread.save()
    for source in HOSTILE:
        posted = message_post(thread=alice_thread, author=alice, text=f"@director {source}")
        settle(posted.replies, source)
    page = client_for().get(make_link(alice, alice_thread)).content.decode()
    parser = Elements()
    parser.feed(page)
    for tag, attrs in parser.found:
        assert tag in ALLOWED_TAGS | PAGE_TAGS | {"button"}, tag
        assert not any(name.startswith("on") for name in attrs), (tag, attrs)
        assert not attrs.get("href", "").lower().startswith("javascript"), attrs
        if tag == "script":
            assert attrs.get("src", "").startswith("/static/"), attrs
        if tag == "button":
            assert attrs.get("class") == "copy-code"


def test_a_live_pages_look_sends_nothing_when_nothing_changed(shared_room, alice):
    path = make_link(alice, shared_room)
    page = client_for().get(path).content.decode()
    (version,) = re.findall(r"transcript/\?v=(\w+)", page)
    assert client_for().get(f"{path}transcript/?v={version}").status_code == 204
    message_post(thread=shared_room, author=alice, text="@director news")
    changed = client_for().get(f"{path}transcript/?v={version}")
    assert changed.status_code == 200 and "news" in changed.content.decode()


def test_a_shared_links_token_is_kept_out_of_the_logs():
    from config.logs import redact_paths

    line = '127.0.0.1:5 - - [x] "GET /shared/Tok-123_xyz/transcript/?v=ab" 200 9'
    assert redact_paths(line) == '127.0.0.1:5 - - [x] "GET /shared/[token]/transcript/?v=ab" 200 9'
    assert redact_paths("Not Found: /shared/Tok-123_xyz/") == "Not Found: /shared/[token]/"
