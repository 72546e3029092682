"""Journeys in a real headless Chromium against the live daphne server and Celery worker."""

import re
from datetime import UTC

import pytest
from playwright.sync_api import expect

from apps.chat.models import Message, MessageStatus
from apps.chat.records.sessions import session_create
from bench.long_threads import thread_fill
from tests.deadlines import scaled

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PASSWORD = "correct-horse-battery"


def log_in(page, username="alice"):
    page.goto("/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("heading", name="Your sessions")).to_be_visible()


def reply_bubble(page):
    return page.get_by_role("article", name=re.compile("Assistant"))


def test_log_in_send_a_message_and_watch_the_reply_stream_in(page, alice, roles, slow_demo):
    log_in(page)
    page.get_by_role("button", name="New session").click()
    page.get_by_role("dialog").get_by_role("button", name="Create session").click()
    box = page.get_by_role("combobox", name="Message")
    box.fill("Hello council, <b>bold</b> is text here")
    box.press("Enter")

    expect(page.get_by_role("article", name="alice")).to_contain_text("<b>bold</b> is text here")
    bubble = reply_bubble(page)
    expect(bubble).to_have_attribute("aria-busy", "true")
    # Each piece of text fades in as it arrives, and is plain text again once shown.
    expect(bubble.locator(".stream-text .fresh").first).to_be_attached()
    stream_text = bubble.locator(".stream-text")
    expect(stream_text).to_contain_text("Demo reply")
    expect(bubble).to_have_attribute("data-status", "done", timeout=scaled(15_000))
    expect(bubble).not_to_have_attribute("aria-busy", "true")
    expect(bubble).to_contain_text("Demo reply from Assistant")
    expect(bubble.locator("pre code")).to_contain_text("def stream(reply):")
    expect(box).to_have_value("")  # the composer was reset and is ready again


def test_reload_during_streaming_continues_to_the_same_final_text(page, alice, roles, slow_demo):
    # Slow enough to still stream after a second tab's load and a reload on a loaded machine
    # (at the fixture's 60 tokens a second the reply could end first).
    slow_demo.PARLEY_DEMO_TOKENS_PER_SECOND = 25
    session = session_create(owner=alice, name="Reload test")
    log_in(page)
    page.goto(f"/t/{session.active_thread.public_id}/")
    page.get_by_role("combobox", name="Message").fill("Tell me how reloading works")
    page.get_by_role("button", name="Send").click()

    bubble = reply_bubble(page)
    expect(bubble).to_have_attribute("data-status", "streaming", timeout=scaled(10_000))
    expect(bubble).to_contain_text("Demo reply", timeout=scaled(10_000))

    # A second tab on the same thread, opened mid-stream.
    other = page.context.new_page()
    other.goto(page.url)

    page.reload()
    bubble = reply_bubble(page)
    expect(bubble).to_have_attribute("data-status", "streaming")
    length_after_reload = len(bubble.inner_text())
    expect(bubble).to_have_attribute("data-status", "done", timeout=scaled(20_000))
    assert len(bubble.inner_text()) > length_after_reload

    reply = Message.objects.get(thread=session.active_thread, speaker="assistant")
    assert reply.status == MessageStatus.DONE
    expect(page.locator("article.msg")).to_have_count(2)  # no duplicated bubbles
    other_bubble = reply_bubble(other)
    expect(other_bubble).to_have_attribute("data-status", "done", timeout=scaled(20_000))
    assert bubble.inner_text() == other_bubble.inner_text()
    expect(bubble).to_contain_text("Close the tab and come back")


def test_a_stranger_cannot_open_someone_elses_thread(page, alice, bob, roles):
    session = session_create(owner=alice, name="Private")
    log_in(page, "bob")
    response = page.goto(f"/t/{session.active_thread.public_id}/")
    assert response.status == 404


def test_scrolling_up_a_long_thread_loads_earlier_messages_in_order_and_keeps_the_place(
    page, alice, roles
):
    session = session_create(owner=alice, name="Long")
    thread_fill(session.active_thread, 250)
    log_in(page)
    page.goto(f"/t/{session.active_thread.public_id}/")
    articles = page.locator("#transcript article.msg")
    expect(articles).to_have_count(100)
    expect(articles.last).to_contain_text("Message number 250.")

    for shown in (200, 250):
        reading = articles.first
        reading_id = reading.get_attribute("id")
        page.evaluate("window.scrollTo({top: 0})")
        expect(articles).to_have_count(shown)
        # The reader keeps their place: the message they were reading is still in view.
        expect(page.locator(f"#{reading_id}")).to_be_in_viewport()

    seqs = [int(seq) for seq in articles.evaluate_all("els => els.map(e => e.dataset.seq)")]
    assert seqs == list(range(1, 251))
    page.evaluate("window.scrollTo({top: 0})")
    expect(page.locator("#earlier")).to_have_count(0)  # nothing before the first message


def test_a_page_keeps_up_on_its_socket_when_redis_restarted_empty(page, alice, roles):
    """Redis lost everything: the live bus numbers the next push past every earlier one, and
    the page, still on its socket, shows it (the gap makes its consumer resync)."""
    from apps.chat import livestate
    from apps.chat.records.threads import thread_rename

    session = session_create(owner=alice, name="Epoch")
    thread = session.active_thread
    log_in(page)
    page.add_init_script(
        "window.__opens = 0;"
        "document.addEventListener('htmx:wsOpen', function () { window.__opens += 1; });"
    )
    page.goto(f"/t/{thread.public_id}/")
    page.wait_for_function("window.__opens === 1")
    expect(page.locator("#sync-state")).to_have_attribute("data-synced", "true")
    thread_rename(thread=thread, label="Before the restart")
    expect(page.locator("h1")).to_contain_text("Before the restart")
    with livestate.sync_client() as client:
        client.flushdb()  # what a Redis that restarted empty holds
    thread_rename(thread=thread, label="After the restart")
    expect(page.locator("h1")).to_contain_text("After the restart")
    assert page.evaluate("window.__opens") == 1


PLACEHOLDER_FITS = """() => {
  const area = document.getElementById("composer-text");
  const style = getComputedStyle(area);
  const pen = document.createElement("canvas").getContext("2d");
  pen.font = style.font;
  const room = area.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
  return pen.measureText(area.placeholder).width <= room;
}"""


@pytest.mark.parametrize("size", [(1280, 800), (390, 844)])
def test_a_reply_says_thinking_until_its_first_text_and_keeps_a_one_line_header(
    page, alice, roles, slow_demo, size, shots
):
    slow_demo.PARLEY_DEMO_FIRST_TOKEN_MS = 2500
    page.set_viewport_size({"width": size[0], "height": size[1]})
    session = session_create(owner=alice, name="Thinking")
    log_in(page)
    page.goto(f"/t/{session.active_thread.public_id}/")
    box = page.get_by_role("combobox", name="Message")
    assert page.evaluate(PLACEHOLDER_FITS), "the composer's placeholder is clipped"
    box.fill("@all what opens the film?")
    box.press("Enter")
    bubble = page.locator("article.msg--role").first
    state = bubble.locator(".msg-state--live")
    expect(state.locator(".if-empty")).to_have_text("thinking…")
    expect(state.locator(".if-empty")).to_be_visible()
    expect(state.locator(".if-text")).to_be_hidden()  # not "streaming · 0 chars"
    header = bubble.locator(".msg-head")
    line = header.locator(".speaker").bounding_box()["height"]
    assert header.bounding_box()["height"] < 2 * line + 12  # one line, with its padding
    expect(state.locator(".if-text")).to_be_visible(timeout=scaled(10_000))
    expect(state.locator(".if-empty")).to_be_hidden()
    assert header.bounding_box()["height"] < 2 * line + 12
    page.screenshot(path=str(shots / f"streaming-{size[0]}.png"))


def test_of_two_copies_of_a_new_bubble_the_one_further_along_stays(chat):
    """The composer's answer and the socket both bring a new bubble. When a reply settles
    before either copy lands (the socket then sends it settled), the settled copy must win
    over a waiting one that came first, and a waiting copy never undoes a settled one."""

    def bubble(status: str, text: str) -> str:
        body = f'<div class="msg-body">{text}</div>'
        return (f'<article id="msg-race" class="msg msg--role" data-seq="9" '
                f'data-status="{status}" data-speaker="director">{body}</article>')  # fmt: skip

    def arrive(status: str, text: str = "") -> None:
        html = f'<div id="transcript" hx-swap-oob="beforeend">{bubble(status, text)}</div>'
        chat.evaluate("html => htmx.swap('#transcript', html, {swapStyle: 'none'})", html)

    race = chat.locator("#msg-race")
    arrive("queued")  # the composer's answer, rendered as the post was saved
    arrive("done", "The settled answer.")  # the socket's catch-up, after the reply ended
    expect(race).to_have_attribute("data-status", "done")
    expect(race).to_have_text("The settled answer.")
    arrive("queued")  # a late copy never takes it back
    expect(race).to_have_attribute("data-status", "done")
    assert race.count() == 1


def test_a_message_of_another_year_says_its_year(chat):
    """An imported chat's messages are from other years: their times say which."""
    from datetime import datetime

    from apps.chat.council.posting import message_post

    thread = chat.session.active_thread
    posted = message_post(thread=thread, author=thread.session.owner, text="/help")
    then = datetime(2024, 3, 9, 14, 5, tzinfo=UTC)
    Message.objects.filter(thread=thread).update(created_at=then)
    chat.reload()
    expect(chat.locator("time.msg-time").first).to_contain_text("2024")
    assert posted is not None
