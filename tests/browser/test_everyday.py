"""What users of other chat apps expect (issue 15), in Chromium: copy, time, search that
opens a thread at a message, Stop only while something runs, cost per reply, HTML export."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest
from playwright.sync_api import expect

from apps.chat.models import Message
from apps.providers.models import ModelPrice
from bench.long_threads import thread_fill
from tests.browser.test_group_chat import bubble, send, wait_done
from tests.deadlines import scaled

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def clipboard(page) -> str:
    return page.evaluate("navigator.clipboard.readText()")


def test_copy_a_code_block_and_a_whole_message(chat, fast_demo):
    chat.context.grant_permissions(["clipboard-read", "clipboard-write"])
    send(chat, "Show me the streaming loop")
    reply = bubble(chat, "assistant")
    wait_done(reply)
    copy_code = reply.get_by_role("button", name="Copy code")
    copy_code.click()
    expect(copy_code).to_have_text("Copied")
    code = clipboard(chat)
    assert code.startswith("def stream(reply):") and "publish(delta)" in code
    reply.get_by_role("button", name="Copy Assistant's reply as Markdown").click()
    expect(reply.get_by_role("button", name="Copy Assistant's reply as Markdown")).to_have_text(
        "Copied"
    )
    stored = Message.objects.get(speaker="assistant").text
    assert clipboard(chat) == stored and "```" in stored
    expect(chat.locator("#announcer")).to_have_text("Copied to the clipboard.")


def test_times_durations_and_cost_per_reply(chat, fast_demo):
    ModelPrice.objects.update_or_create(
        provider="demo", model="demo-1", defaults={
            "input_per_mtok": Decimal("2"), "output_per_mtok": Decimal("10"),
            "cache_read_per_mtok": Decimal("0.2"), "cache_write_per_mtok": Decimal("2.5"),
        },
    )  # fmt: skip
    send(chat, "How long does this take?")
    reply = bubble(chat, "assistant")
    wait_done(reply)
    expect(reply.locator("time.msg-time")).to_have_text("just now")
    title = reply.locator("time.msg-time").get_attribute("title")
    assert title and any(ch.isdigit() for ch in title)  # the exact local time on hover
    expect(reply.locator(".msg-took")).to_contain_text(" s")
    stored = Message.objects.get(speaker="assistant")
    usage = stored.usage
    expected = (Decimal(usage["input"]) * 2 + Decimal(usage["output"]) * 10) / 1_000_000
    cost = reply.locator(".msg-cost")
    expect(cost).to_have_text(f"${expected:.4f}")
    assert f"{usage['output']:,} out" in cost.get_attribute("title")
    expect(chat.locator("#thread-usage")).to_contain_text(f"${expected:.4f}")


def test_stop_shows_only_while_something_runs(chat, slow_demo):
    stop = chat.get_by_role("button", name="Stop")
    expect(stop).to_be_hidden()
    send(chat, "A long answer, please")
    expect(stop).to_be_visible()
    stop.click()
    expect(bubble(chat, "assistant")).to_have_attribute("data-status", "interrupted")
    expect(stop).to_be_hidden()


def test_a_long_replys_header_stays_in_view_while_you_read_it(chat, fast_demo):
    chat.set_viewport_size({"width": 1280, "height": 520})
    send(chat, "A long answer, please")
    wait_done(bubble(chat, "assistant"))
    send(chat, "And another")  # something below, so the first can scroll past the top
    wait_done(bubble(chat, "assistant").nth(1))
    first = bubble(chat, "assistant").first
    first.evaluate(
        "el => window.scrollTo(0, window.scrollY + el.getBoundingClientRect().top + 150)"
    )
    reply_top = first.evaluate("el => el.getBoundingClientRect().top")
    head = first.locator(".msg-head")
    head_top = head.evaluate("el => el.getBoundingClientRect().top")
    # The thread's own header (title and actions) stays under the top bar; the reply's header
    # is held right under both.
    header_bottom = chat.locator(".chat-top").evaluate("el => el.getBoundingClientRect().bottom")
    bar_bottom = chat.locator(".topbar").evaluate("el => el.getBoundingClientRect().bottom")
    assert header_bottom > bar_bottom, "the thread's header is in view under the top bar"
    assert reply_top < 0, "the reply's top has scrolled out of view"
    assert abs(head_top - header_bottom) <= 0.5, (head_top, header_bottom)
    expect(head.get_by_text("Assistant")).to_be_in_viewport()


def test_the_composer_resizes_by_dragging_keeps_its_size_and_turns_autofill_away(chat, fast_demo):
    box = chat.get_by_role("combobox", name="Message", exact=True)
    assert box.get_attribute("autocomplete") == "off"
    for attribute in ("data-1p-ignore", "data-lpignore", "data-bwignore"):
        assert box.get_attribute(attribute) is not None, attribute
    before = box.bounding_box()
    chat.mouse.move(before["x"] + before["width"] - 3, before["y"] + before["height"] - 3)
    chat.mouse.down()  # the resize grip in the bottom right corner
    chat.mouse.move(
        before["x"] + before["width"] - 3, before["y"] + before["height"] + 117, steps=5
    )
    chat.mouse.up()
    dragged = box.bounding_box()["height"]
    assert dragged > before["height"] + 80, (before["height"], dragged)
    send(chat, "Does the box keep its size?")
    wait_done(bubble(chat, "assistant"))
    assert abs(box.bounding_box()["height"] - dragged) <= 2
    box.fill("a short line")  # typing does not shrink a box sized by hand
    assert abs(box.bounding_box()["height"] - dragged) <= 2


def test_search_opens_a_deep_message_of_a_long_thread_highlighted(chat):
    from apps.chat.records.threads import thread_create, thread_rename

    long_thread = thread_create(session=chat.session)
    thread_rename(thread=long_thread, label="The long one")
    thread_fill(long_thread, 2_000)
    chat.reload()
    chat.get_by_role("searchbox", name="Search this session").fill("number 321")
    results = chat.get_by_role("region", name="Search results")
    hit = results.get_by_role("link").filter(has_text="The long one")
    expect(hit).to_have_count(1)
    expect(hit).to_contain_text("User")  # odd numbers are a person's (no author: "User")
    expect(hit.locator("mark")).to_have_count(2)
    hit.click()
    target = Message.objects.get(thread=long_thread, seq=321)
    found = chat.locator(f"#msg-{target.public_id}")
    expect(found).to_be_in_viewport()
    expect(found).to_have_class(__import__("re").compile("msg--found"))
    # Later messages follow as the reader scrolls down, in order.
    chat.locator("#later").scroll_into_view_if_needed()
    later = Message.objects.get(thread=long_thread, seq=400)  # the window ends at 371
    expect(chat.locator(f"#msg-{later.public_id}")).to_be_attached()


def test_export_as_a_self_contained_html_page(chat, fast_demo, tmp_path):
    send(chat, "Export me")
    wait_done(bubble(chat, "assistant"))
    with chat.expect_download() as download:
        chat.get_by_text("Export", exact=True).click()
        chat.get_by_role("link", name="HTML page").click()
    path = Path(download.value.path())
    html = path.read_text()
    assert html.startswith("<!doctype html>") and "Export me" in html
    copy = tmp_path / "thread.html"
    copy.write_text(html)
    chat.goto(copy.as_uri())
    expect(chat.get_by_role("article", name="Assistant")).to_contain_text("Demo reply")


# A page has decided on the last notice it heard (notified, or left it to another tab).
DECIDED = "!!document.getElementById('turn-notices').dataset.decided"
RECORD_NOTIFICATIONS = """
    window.__notifications = [];
    window.__notificationBodies = [];
    const Real = window.Notification;
    window.Notification = function (title, options) {
        window.__notifications.push(title);
        window.__notificationBodies.push((options || {}).body);
        return new Real(title, options);
    };
    Object.defineProperty(window.Notification, "permission", { get: () => Real.permission });
    window.Notification.requestPermission = (...args) => Real.requestPermission(...args);
"""
HIDE_THE_TAB = """
    Object.defineProperty(document, "hidden", { configurable: true, get: () => true });
    document.dispatchEvent(new Event("visibilitychange"));
"""


def test_a_turn_that_finishes_while_you_are_away_notifies_and_leaves_badges(chat, slow_demo):
    from apps.chat.records.threads import thread_create

    chat.context.grant_permissions(["notifications"])
    chat.add_init_script(RECORD_NOTIFICATIONS)
    chat.reload()
    expect(chat.get_by_role("button", name="Notify me")).to_be_hidden()  # already granted
    other_thread = thread_create(session=chat.session)
    watcher = chat.context.new_page()  # the person, now on another thread of the session
    watcher.goto(f"/t/{other_thread.public_id}/")
    expect(watcher.locator("#sync-state")).to_have_attribute("data-synced", "true")
    thread_url = chat.url

    send(chat, "Tell me a long story")
    chat.evaluate(HIDE_THE_TAB)
    wait_done(bubble(chat, "assistant"), timeout=scaled(30_000))
    chat.wait_for_function("window.__notifications.length > 0")
    assert chat.evaluate("window.__notifications") == ["Assistant replied"]
    # The other tab's sidebar counts the reply as new; so does the sessions list.
    badge = watcher.locator(".thread-item", has=watcher.locator(f'a[href$="{thread_url[-38:]}"]'))
    expect(badge.locator(".unread-badge")).to_have_text("1 new")
    watcher.goto("/")
    expect(watcher.locator(".session-row .unread-badge")).to_have_text("1 new")
    # Back on the thread: the new reply is marked, and then it is read.
    watcher.goto(thread_url)
    divider = watcher.get_by_role("separator").filter(has_text="New since you left")
    expect(divider).to_be_visible()
    expect(divider.locator("xpath=following-sibling::article[1]")).to_have_attribute(
        "data-speaker", "assistant"
    )
    watcher.goto("/")
    expect(watcher.locator(".session-row .unread-badge")).to_be_hidden()


def test_a_turn_that_finishes_while_you_are_on_another_session_notifies_once_live(chat, slow_demo):
    from apps.chat.records.sessions import session_create

    chat.context.grant_permissions(["notifications"])
    chat.context.add_init_script(RECORD_NOTIFICATIONS)  # every page of the browser
    errors: list[str] = []
    chat.on("console", lambda message: message.type == "error" and errors.append(message.text))
    chat.reload()
    elsewhere = session_create(owner=chat.session.owner, name="Lighthouse score")
    sessions_page = chat.context.new_page()  # a second tab, on the sessions list
    sessions_page.goto("/")
    badge = sessions_page.locator(f"#unread-{chat.session.public_id}")
    expect(badge).to_be_hidden()
    thread_url = chat.url

    send(chat, "Tell me a long story")
    expect(bubble(chat, "assistant")).to_have_attribute("data-status", "streaming")
    chat.goto(f"/t/{elsewhere.active_thread.public_id}/")  # on to another session meanwhile
    expect(chat.locator("#sync-state")).to_have_attribute("data-synced", "true")
    # Without a reload: the sessions list counts the reply; one of the two tabs notifies.
    expect(badge).to_have_text("1 new", timeout=scaled(30_000))

    def shown():
        return chat.evaluate("window.__notifications") + sessions_page.evaluate(
            "window.__notifications"
        )

    for page in (chat, sessions_page):  # each tab has decided: shown, or left to the other
        page.wait_for_function(DECIDED, timeout=scaled(30_000))
    assert shown() == ["Assistant replied"]
    bodies = chat.evaluate("window.__notificationBodies") + sessions_page.evaluate(
        "window.__notificationBodies"
    )
    assert len(bodies) == 1 and bodies[0].endswith(f" · {chat.session.name}")
    # Reading the thread in one tab clears the badge in the other at once.
    chat.goto(thread_url)
    expect(badge).to_be_hidden()
    assert errors == []  # a thread page has no session badge: nothing is swapped into nothing


def test_tabs_that_hear_a_notice_at_the_same_moment_notify_once(chat):
    chat.context.grant_permissions(["notifications"])
    chat.context.add_init_script(RECORD_NOTIFICATIONS)
    pages = [chat] + [chat.context.new_page() for _ in range(3)]
    for page in pages:
        page.goto("/")
    at = chat.evaluate("Date.now() + 1500")
    notice = (
        '<div class="turn-notice" data-session="s" data-thread="t" data-seq="7" '
        'data-title="Director replied" data-body="Plan · Film" data-url="/"></div>'
    )
    for page in pages:  # each appends the same notice at the same instant, as the sockets do
        page.evaluate(
            """([at, html]) => setTimeout(() => {
                document.getElementById("turn-notices").insertAdjacentHTML("beforeend", html);
            }, at - Date.now())""",
            [at, notice],
        )
    for page in pages:
        page.wait_for_function("document.getElementById('turn-notices').dataset.decided === 't:7'")
    shown = [title for page in pages for title in page.evaluate("window.__notifications")]
    assert shown == ["Director replied"]


def test_notifications_are_asked_for_from_a_button_never_on_load(chat):
    assert chat.evaluate("Notification.permission") == "default"
    chat.set_viewport_size({"width": 390, "height": 844})  # a phone: in the account menu
    button = chat.get_by_role("button", name="Notify me")
    expect(button).to_be_hidden()
    chat.locator(".account-menu > summary").click()
    expect(button).to_be_visible()
    chat.locator(".account-menu > summary").click()
    chat.set_viewport_size({"width": 1280, "height": 800})
    expect(button).to_be_visible()
    chat.context.grant_permissions(["notifications"])
    button.click()
    expect(button).to_be_hidden()
