"""Shared rooms in real browsers: two and three people, each in their own browser context and
logged in as themselves, in one room with the council."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from apps.chat.council.posting import message_post
from apps.chat.models import Message, MessageStatus
from apps.chat.records.rooms import member_add
from apps.chat.records.sessions import session_create
from tests.browser.test_group_chat import bubble, send, wait_done
from tests.browser.test_live_chat import log_in
from tests.conftest import wait_until
from tests.deadlines import scaled

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def person(browser_session, asgi_server):
    """Another person's browser: a context of its own, logged in as them."""
    contexts = []

    def open_as(username: str):
        context = browser_session.new_context(base_url=asgi_server.url)
        contexts.append(context)
        page = context.new_page()
        log_in(page, username)
        return page

    yield open_as
    for context in contexts:
        browser_session.close_context(context)


def open_thread(page, thread):
    page.goto(f"/t/{thread.public_id}/")
    expect(page.locator("#sync-state")).to_have_attribute("data-synced", "true")


def test_three_people_talk_whisper_and_see_each_other_live(
    page, person, alice, bob, charlie, anthropic_thread, emulator, shots
):
    thread = anthropic_thread
    member_add(session=thread.session, by=alice, username="bob")
    member_add(session=thread.session, by=alice, username="charlie", role="viewer")
    log_in(page)
    sam, viewer = person("bob"), person("charlie")
    for each in (page, sam, viewer):
        open_thread(each, thread)
    # Presence: everyone sees the others (not themselves).
    for each, me in ((page, "alice"), (sam, "bob"), (viewer, "charlie")):
        for name in {"alice", "bob", "charlie"} - {me}:
            expect(each.locator("#room-presence")).to_contain_text(name)
        expect(each.locator("#room-presence .presence-person", has_text=me)).to_be_hidden()
    expect(viewer.locator("#role-drawer summary")).not_to_contain_text("tap one")
    # The viewer reads live and cannot post; the member sees no settings.
    expect(viewer.get_by_text("You are a viewer in this room")).to_be_visible()
    expect(viewer.get_by_role("combobox", name="Message", exact=True)).to_have_count(0)
    expect(sam.locator("#settings-open")).to_have_count(0)

    # Typing shows on the others' pages, then clears.
    sam.get_by_role("combobox", name="Message", exact=True).press_sequentially("@director wh")
    expect(page.locator("#typing-line")).to_have_text("bob is typing…")
    expect(page.locator("#typing-line")).to_have_text("", timeout=scaled(8_000))

    # A member's message and the role's reply reach every page live, with who wrote it.
    send(sam, "@director what about the harbour at dawn?")
    for each in (page, sam, viewer):
        mine = each.locator("#transcript article.msg--user").last
        expect(mine).to_have_attribute("aria-label", "bob")
        expect(mine).to_contain_text("harbour at dawn")
        wait_done(bubble(each, "director").last)
    expect(sam.locator("#transcript article.msg--user .speaker").last).to_have_text("bob")

    # A whisper to one role and one person: only they see it and its reply.
    send(page, "/whisper @editorial_architect @bob the budget is zanzibar, keep it quiet")
    for each in (page, sam):
        expect(each.locator("#transcript article.msg--whisper")).to_have_count(2)
        wait_done(bubble(each, "editorial_architect").last)
    # The README's shot: the owner's page with presence, people's messages and a whisper.
    page.screenshot(path=str(shots / "room.png"), full_page=False)
    send(sam, "@director and the chase scene?")
    wait_done(bubble(viewer, "director").last)
    expect(viewer.locator("#transcript")).not_to_contain_text("zanzibar")
    assert viewer.locator("#transcript article.msg--whisper").count() == 0
    bodies = {}
    for request in emulator.requests:
        body = str(request.body)
        for handle in ("director", "editorial_architect"):
            if f"You are @{handle}" in body:
                bodies.setdefault(handle, []).append(body)
    assert all("zanzibar" not in body for body in bodies["director"])
    assert any("zanzibar" in body for body in bodies["editorial_architect"])

    # The owner takes the viewer out: their tab is told and closes; a reload is a 404.
    page.locator("#room-open").click()
    dialog = page.locator("#room-dialog")
    expect(dialog.locator(".room-person[data-username=charlie]")).to_be_visible()
    dialog.screenshot(path=str(shots / "room-people.png"))
    page.once("dialog", lambda prompt: prompt.accept())
    dialog.locator(".room-person[data-username=charlie]").get_by_role(
        "button", name="Remove"
    ).click()
    expect(dialog.locator(".room-person[data-username=charlie]")).to_have_count(0)
    expect(viewer.locator("#room-banner")).to_contain_text("You are no longer in this room")
    expect(page.locator("#room-presence")).not_to_contain_text("charlie", timeout=scaled(8_000))
    response = viewer.reload()
    assert response is not None and response.status == 404


def test_a_returning_member_gets_a_while_you_were_away_card(
    page, person, alice, bob, roles, fast_demo
):
    session = session_create(owner=alice, name="Night shoot")
    thread = session.active_thread
    member_add(session=session, by=alice, username="bob")
    sam = person("bob")
    open_thread(sam, thread)
    sam.goto("/")  # bob goes away
    for n in range(3):
        posted = message_post(thread=thread, author=alice, text=f"@director decide shot {n}")
        wait_until(
            lambda p=posted: (
                not Message.objects.filter(
                    pk__in=[r.pk for r in p.replies], status__in=("queued", "streaming")
                ).exists()
            ),
            timeout=scaled(20),
        )
    # Back on the sessions list, the room shows what is new and whose room it is.
    sam.reload()
    row = sam.locator(".session-row", has_text="Night shoot")
    expect(row).to_contain_text("shared by alice")
    expect(row.locator(".unread-badge")).to_have_text(re.compile(r"^\d+"))
    row.get_by_role("link", name=re.compile("Night shoot")).click()
    card = sam.locator("#digest-card")
    expect(card).to_contain_text("While you were away")
    expect(card.locator(".digest-body")).to_be_visible(timeout=scaled(20_000))  # filled in live
    assert Message.objects.filter(thread=thread, status=MessageStatus.DONE).count() >= 6
