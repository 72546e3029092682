"""Every URL and socket for the people of a shared room: the owner (alice), a member (bob), a
viewer (charlie), someone removed (dave), a stranger (erin) and an anonymous visitor. Each gets
what their need allows (see `apps.chat.access`); a refusal changes nothing and says why (403)
to someone who may read the room, and is a 404 to anyone else."""

from __future__ import annotations

import asyncio
import json

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import resolve, reverse

from apps.chat.council.posting import message_post
from apps.chat.models import Membership, QueuedMessage
from apps.chat.records.rooms import invite_create, member_add, member_remove
from config.asgi import application
from tests.chat.test_every_url import snapshot, urls, world  # noqa: F401  (a fixture)
from tests.chat.test_live_streaming import open_tab, session_cookie

pytestmark = pytest.mark.django_db

# What each URL needs of the requesting person; "author": only the person who wrote it (or,
# for a queued message, the room's owner); None: the owner's own things outside the room.
NEEDS = {
    "files_panel": "read",
    "files_download": "read",
    "files_upload": "talk",
    "files_delete": "talk",
    "message_continue": "talk",
    "message_new_chat": "author",
    "message_unroute": "talk",
    "queued_edit": "author",
    "queued_cancel": "author",
    "queued_send_now": "talk",
    "server_test": None,
    "server_delete": None,
    "thread_detail": "read",
    "session_detail": "read",
    "session_settings": "own",
    "thread_export": "read",
    "session_search": "read",
    "thread_later": "read",
    "message_source": "read",
    "thread_seen": "read",
    "credential_edit": None,
    "credential_models": None,
    "message_create": "talk",
    "thread_rename": "talk",
    "message_rerun": "talk",
    "thread_interrupt": "talk",
    "message_branch": "talk",
    "message_edit": "author",
    "thread_create": "talk",
    "session_rename": "own",
    "thread_clear": "own",
    "thread_share": "own",
    "credential_test": None,
    "credential_delete": None,
    "session_delete": "own",
    "room_panel": "read",
    "room_add": "own",
    "room_invite": "own",
    "room_update": "own",
    "room_invite_revoke": "own",
    "context_history": "own",
    "context_restore": "own",
    "thread_use_latest": "own",
    "attachments_upload": "talk",
    "attachments_from_files": "talk",
    "attachment_save": "talk",
    "attachment_preview": "read",
    "attachment_file": "read",
    "attachment_remove": "author",
}
ALLOWED = {"member": {"read", "talk"}, "viewer": {"read"}}


def _pk(username: str) -> int:
    return get_user_model().objects.get(username=username).pk


def room_urls(w) -> list[tuple[str, str, dict]]:
    s = w["session"]
    extra = [
        ("get", reverse("chat:room_panel", kwargs={"session": s}), {}),
        ("post", reverse("chat:room_add", kwargs={"session": s}), {"username": "erin"}),
        ("post", reverse("chat:room_invite", kwargs={"session": s}), {"role": "member"}),
        ("post", reverse("chat:room_update", kwargs={"session": s, "person": _pk("bob")}),
         {"role": "viewer"}),
        ("post", reverse("chat:room_invite_revoke", kwargs={"session": s, "invite": w["invite"]}),
         {}),
    ]  # fmt: skip
    listed = [(method, url, data) for method, url, data, _ in urls(w)]
    return listed[:-1] + extra + listed[-1:]  # the session's deletion last


@pytest.fixture
def room(world, alice, alice_thread, bob, charlie, make_user):  # noqa: F811
    session = alice_thread.session
    member_add(session=session, by=alice, username="bob")
    member_add(session=session, by=alice, username="charlie", role="viewer")
    dave = make_user("dave")
    member_remove(membership=member_add(session=session, by=alice, username="dave"), by=alice)
    make_user("erin")
    invite, _ = invite_create(session=session, by=alice)
    return {**world, "invite": invite.pk, "dave": dave}


@pytest.mark.parametrize("who", ["member", "viewer"])
def test_members_and_viewers_get_what_their_role_allows_and_a_reason_otherwise(
    room, who, bob, charlie
):
    client = Client()
    client.force_login(bob if who == "member" else charlie)
    for method, url, data in room_urls(room):
        name = resolve(url.split("?")[0]).url_name
        need = NEEDS[name]
        before = snapshot()
        response = getattr(client, method)(url, data, HTTP_HX_REQUEST="true")
        if need is None:
            assert response.status_code == 404, (who, name, response.status_code)
        elif need in ALLOWED[who]:
            assert response.status_code < 400 or response.status_code in (409, 422), (
                who, name, response.status_code, response.content[:200],
            )  # fmt: skip
        else:
            assert response.status_code == 403, (who, name, response.status_code)
            assert response["Content-Type"].startswith("text/plain")
            assert response.content, (who, name)  # says why
            assert snapshot() == before, (who, name)


def test_a_viewer_who_posts_is_told_why_and_nothing_is_posted(room, charlie, alice_thread, caplog):
    client = Client()
    client.force_login(charlie)
    url = reverse("chat:message_create", kwargs={"thread": alice_thread.public_id})
    before = snapshot()
    with caplog.at_level("WARNING", logger="django.request"):
        response = client.post(url, {"text": "@director hi"}, HTTP_HX_REQUEST="true")
    assert response.status_code == 403
    (logged,) = [r for r in caplog.records if r.name == "django.request"]
    assert logged.exc_info is None  # one line, no traceback: a refusal is not an error
    assert "You are a viewer in this room" in response.content.decode()  # the reason
    assert snapshot() == before
    page = client.get(url.replace("messages/", ""))  # the thread's page: no composer
    html = page.content.decode()
    assert 'id="composer"' not in html and "You are a viewer in this room" in html
    assert 'id="settings-open"' not in html and 'id="new-chat"' not in html  # nothing to refuse


@pytest.mark.parametrize("who", ["dave", "erin"])
def test_someone_removed_or_a_stranger_gets_404_everywhere(room, who):
    client = Client()
    client.force_login(_user(who))
    before = snapshot()
    for method, url, data in room_urls(room):
        response = getattr(client, method)(url, data, HTTP_HX_REQUEST="true")
        assert response.status_code == 404, (who, method, url, response.status_code)
    assert snapshot() == before


def _user(username: str):
    from django.contrib.auth import get_user_model

    return get_user_model().objects.get(username=username)


def test_anonymous_visitors_are_sent_to_log_in_everywhere(room):
    client = Client()
    for method, url, data in room_urls(room):
        response = getattr(client, method)(url, data)
        assert response.status_code == 302 and "/login/" in response["Location"], url
    join = reverse("chat:room_join", kwargs={"token": "anything"})
    assert client.get(join)["Location"] == "/login/?next=%2Fjoin%2F"  # no token in it


def test_a_member_edits_and_cancels_only_their_own_queued_messages(room, bob, alice_thread):
    client = Client()
    client.force_login(bob)
    mine = QueuedMessage.objects.create(thread=alice_thread, author=bob, text="mine")
    url = reverse("chat:queued_edit", kwargs={"queued": mine.public_id})
    assert client.post(url, {"text": "still mine"}, HTTP_HX_REQUEST="true").status_code == 204
    assert QueuedMessage.objects.get(pk=mine.pk).text == "still mine"
    cancel = reverse("chat:queued_cancel", kwargs={"queued": mine.public_id})
    assert client.post(cancel, HTTP_HX_REQUEST="true").status_code == 204
    assert not QueuedMessage.objects.filter(pk=mine.pk).exists()


@pytest.mark.django_db(transaction=True)
async def test_sockets_open_for_the_room_and_close_for_everyone_else(
    alice, bob, charlie, alice_thread, make_user
):
    session = alice_thread.session
    await database_sync_to_async(member_add)(session=session, by=alice, username="bob")
    await database_sync_to_async(member_add)(
        session=session, by=alice, username="charlie", role="viewer"
    )
    stranger = await database_sync_to_async(make_user)("erin")
    for person in (alice, bob, charlie):
        tab = await open_tab(await database_sync_to_async(session_cookie)(person), alice_thread)
        frame = await tab.receive_from(timeout=10)
        assert "sync-state" in frame or "msg" in frame or "thread-status" in frame
        await tab.disconnect()
    for cookie, code in ((await database_sync_to_async(session_cookie)(stranger), 4404),
                         (None, 4401)):  # fmt: skip
        tab = await open_tab(cookie, alice_thread)
        assert await tab.receive_output(timeout=5) == {"type": "websocket.close", "code": code}
        await tab.disconnect()


@pytest.mark.django_db(transaction=True)
async def test_a_removed_members_open_tab_is_told_and_closed_at_once(alice, bob, alice_thread):
    session = alice_thread.session
    membership = await database_sync_to_async(member_add)(session=session, by=alice, username="bob")
    tab = await open_tab(await database_sync_to_async(session_cookie)(bob), alice_thread)
    async with asyncio.timeout(10):
        while 'data-synced="true"' not in await tab.receive_from(timeout=10):
            pass
    await database_sync_to_async(member_remove)(membership=membership, by=alice)
    frames = []
    async with asyncio.timeout(10):
        while True:
            output = await tab.receive_output(timeout=10)
            if output["type"] == "websocket.close":
                assert output["code"] == 4404
                break
            frames.append(output.get("text", ""))
    await tab.disconnect()
    assert any("You are no longer in this room" in frame for frame in frames)
    assert not await Membership.objects.filter(user=bob).aexists()


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("how", ["removed", "left"])
async def test_a_socket_opened_before_losing_access_gets_nothing_when_it_syncs(
    how, alice, bob, alice_thread
):
    """Opened while in the room, synced after being taken out (or leaving): the socket closes
    with 4404 and sends no bubble, no transcript and no live push."""
    session = alice_thread.session
    membership = await database_sync_to_async(member_add)(session=session, by=alice, username="bob")
    await database_sync_to_async(message_post)(
        thread=alice_thread, author=alice, text="secret plan"
    )
    headers = [(b"origin", b"http://localhost"),
               (b"cookie", await database_sync_to_async(session_cookie)(bob))]  # fmt: skip
    tab = WebsocketCommunicator(application, f"/ws/threads/{alice_thread.public_id}/", headers)
    connected, _ = await tab.connect(timeout=10)
    assert connected
    await database_sync_to_async(member_remove)(
        membership=membership, by=alice if how == "removed" else bob
    )
    await tab.send_to(text_data=json.dumps({"type": "sync", "after_seq": 0, "pending": []}))
    frames = []
    async with asyncio.timeout(10):
        while (output := await tab.receive_output(timeout=10))["type"] != "websocket.close":
            frames.append(output.get("text", ""))
    await tab.disconnect()
    assert output["code"] == 4404
    assert not any("secret plan" in frame or "msg-" in frame for frame in frames), frames


def test_an_invite_link_made_in_the_panel_lets_one_person_in_once(alice, alice_thread, make_user):
    session = alice_thread.session
    owner = Client()
    owner.force_login(alice)
    panel = owner.post(
        reverse("chat:room_invite", kwargs={"session": session.public_id}),
        {"role": "viewer", "lifetime": "1d"},
        HTTP_HX_REQUEST="true",
    ).content.decode()
    link = panel.split('id="room-invite-link"')[0].rsplit('value="', 1)[1].split('"')[0]
    path = link.split("testserver", 1)[1]
    guest = Client()
    guest.force_login(make_user("erin"))
    page = guest.get(path, follow=True)
    assert page.redirect_chain == [("/join/", 302)]  # the token leaves the address bar
    assert (
        "Join “Alice&#x27;s session”" in page.content.decode() and "viewer" in page.content.decode()
    )
    joined = guest.post("/join/")
    assert joined.status_code == 302
    assert Membership.objects.get(user__username="erin").role == "viewer"
    other = Client()
    other.force_login(make_user("frank"))
    other.get(path)
    assert other.post("/join/").status_code == 410  # used
    assert other.get(path, follow=True).status_code == 404
    # A revoked link does not work either.
    owner.post(
        reverse("chat:room_invite", kwargs={"session": session.public_id}), {"role": "member"}
    )
    from apps.chat.models import RoomInvite

    fresh = RoomInvite.objects.filter(used_at__isnull=True).get()
    revoke = reverse(
        "chat:room_invite_revoke", kwargs={"session": session.public_id, "invite": fresh.pk}
    )
    assert owner.post(revoke, HTTP_HX_REQUEST="true").status_code == 200
    assert RoomInvite.objects.get(pk=fresh.pk).revoked_at is not None


def test_a_member_leaves_and_loses_access(alice, bob, alice_thread):
    member_add(session=alice_thread.session, by=alice, username="bob")
    client = Client()
    client.force_login(bob)
    leave = reverse(
        "chat:room_remove", kwargs={"session": alice_thread.session.public_id, "person": bob.pk}
    )
    assert client.post(leave).status_code == 302
    url = reverse("chat:thread_detail", kwargs={"thread": alice_thread.public_id})
    assert client.get(url).status_code == 404
    assert alice_thread.session.name not in client.get("/").content.decode()


def test_an_invite_link_carries_through_login_and_stays_out_of_urls_and_logs(
    alice, alice_thread, make_user, caplog
):
    """Signed out: the link leads to the login page with `next=/join/` (no token), and after
    logging in the person joins. Django's warnings for a dead link print no token."""
    _, token = invite_create(session=alice_thread.session, by=alice)
    erin = make_user("erin")
    visitor = Client()
    to_login = visitor.get(f"/join/{token}/")
    assert token not in to_login["Location"]
    visitor.force_login(erin)  # keeps the session, as the login form does
    page = visitor.get(to_login["Location"].split("next=")[1].replace("%2F", "/"))
    assert page.status_code == 200 and "Join “" in page.content.decode()
    assert visitor.post("/join/").status_code == 302
    assert Membership.objects.filter(user=erin, session=alice_thread.session).exists()
    with caplog.at_level("WARNING"):
        Client().get(f"/join/{token}/").status_code  # noqa: B018
        stranger = Client()
        stranger.force_login(make_user("frank"))
        stranger.get(f"/join/{token}/", follow=True)
        stranger.post("/join/")
    assert caplog.records and token not in caplog.text


def test_following_a_link_while_already_in_the_room_keeps_the_link(alice, bob, alice_thread):
    member_add(session=alice_thread.session, by=alice, username="bob")
    invite, token = invite_create(session=alice_thread.session, by=alice, role="viewer")
    client = Client()
    client.force_login(bob)
    client.get(f"/join/{token}/")
    answer = client.post("/join/")
    assert (
        answer.status_code == 409 and "already in this room as a member" in answer.content.decode()
    )
    invite.refresh_from_db()
    assert invite.used_at is None
    assert Membership.objects.get(user=bob).role == "member"


def test_the_web_process_access_log_redacts_invite_tokens():
    from config.logs import redact_paths

    line = '127.0.0.1:5 - - [x] "GET /join/AbC-123_xyz/" 302 0'
    assert redact_paths(line) == '127.0.0.1:5 - - [x] "GET /join/[token]/" 302 0'
    assert redact_paths("Not Found: /join/AbC-123_xyz/") == "Not Found: /join/[token]/"
