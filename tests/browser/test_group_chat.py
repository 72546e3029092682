"""The group chat as a person meets it, in headless Chromium against daphne and a real worker."""

from __future__ import annotations

import re
import threading
from pathlib import Path

import pytest
from django.db import connections
from playwright.sync_api import expect

from apps.chat.models import Message, MessageStatus, Session
from apps.chat.records.sessions import session_create
from apps.providers.emulator import Script
from apps.roles.models import Role
from tests.browser.test_live_chat import log_in
from tests.conftest import wait_until
from tests.deadlines import scaled

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def off_the_event_loop(function) -> None:
    """Run a service that publishes to the channel layer: Playwright's sync API keeps an event
    loop in this thread, where async_to_sync refuses to run."""
    errors = []

    def run():
        try:
            function()
        except Exception as exc:  # re-raised in the test's thread
            errors.append(exc)
        finally:  # a dead thread's connection never goes back to the pool
            connections.close_all()

    worker = threading.Thread(target=run)
    worker.start()
    worker.join(30)
    if errors:
        raise errors[0]


def send(page, text: str) -> None:
    box = page.get_by_role("combobox", name="Message", exact=True)
    box.fill(text)
    box.press("Enter")
    expect(box).to_have_value("")


def bubble(page, speaker: str):
    return page.locator(f"#transcript article[data-speaker={speaker}]")


def wait_done(locator, timeout: float | None = None):
    timeout = scaled(20_000) if timeout is None else timeout
    expect(locator).to_have_attribute("data-status", "done", timeout=timeout)


def test_two_mentions_the_visual_architect_first_and_the_director_after(chat, fast_demo):
    send(chat, "@director @visual_architect how should the harbour scene open?")
    visual, director = bubble(chat, "visual_architect"), bubble(chat, "director")
    wait_done(director)
    wait_done(visual)
    speakers = chat.locator("#transcript article").evaluate_all(
        "els => els.map(e => e.dataset.speaker)"
    )
    assert speakers == ["user", "visual_architect", "director"]
    replies = {m.speaker: m for m in Message.objects.exclude(speaker="user")}
    assert replies["director"].started_at >= replies["visual_architect"].finished_at
    expect(chat.get_by_role("article", name=re.compile("Director"))).to_contain_text(
        "Demo reply from Director"
    )

    # A follow-up without a mention goes to the last role addressed by name.
    expect(chat.locator("#addressing")).to_contain_text("@visual_architect")
    send(chat, "and what colour is the light?")
    expect(bubble(chat, "visual_architect")).to_have_count(2)
    expect(bubble(chat, "director")).to_have_count(1)


def test_mute_then_all_skips_the_muted_role(chat, fast_demo):
    send(chat, "/mute @sound_designer")
    expect(chat.get_by_role("article", name="Parley")).to_contain_text("@sound_designer muted")
    expect(
        chat.get_by_role("group", name="Roles").get_by_role("button", name="@sound_designer")
    ).to_have_class(re.compile("chip--muted"))
    send(chat, "@all one word each")
    wait_done(bubble(chat, "director"))
    speakers = set(
        chat.locator("#transcript article.msg--role").evaluate_all(
            "els => els.map(e => e.dataset.speaker)"
        )
    )
    assert speakers == {"assistant", "editorial_architect", "visual_architect", "actor_agent",
                        "director"}  # fmt: skip


def test_escape_stops_a_fan_out(chat, slow_demo):
    # Slow enough that no role can finish before Escape, however loaded the machine.
    slow_demo.PARLEY_DEMO_TOKENS_PER_SECOND = 15
    send(chat, "@all take your time")
    for speaker in ("assistant", "editorial_architect", "visual_architect"):
        expect(bubble(chat, speaker)).to_contain_text("Demo reply", timeout=scaled(10_000))
    chat.get_by_role("combobox", name="Message", exact=True).press("Escape")
    for speaker in ("assistant", "editorial_architect", "visual_architect", "director"):
        expect(bubble(chat, speaker)).to_have_attribute(
            "data-status", "interrupted", timeout=scaled(5_000)
        )
    # The roles not checked above settle as their workers close their streams.
    wait_until(lambda: not Message.objects.filter(status__in=["queued", "streaming"]).exists())
    partial = Message.objects.get(speaker="visual_architect")
    assert partial.text and partial.status == MessageStatus.INTERRUPTED
    expect(bubble(chat, "visual_architect").get_by_role("button", name="Retry")).to_be_visible()


def test_branch_from_here_shows_the_history_up_to_that_message(chat, fast_demo):
    send(chat, "First question about the harbour")
    wait_done(bubble(chat, "assistant"))
    send(chat, "Second question about the market")
    wait_done(bubble(chat, "assistant").nth(1))
    first_reply = bubble(chat, "assistant").first
    first_reply.get_by_role("button", name="Branch from here").click()
    expect(chat).not_to_have_url(re.compile(str(chat.session.active_thread.public_id)))
    current = chat.locator(".thread-tree a[aria-current=page]")
    expect(current).to_contain_text("Branch 1 · ")
    history = chat.get_by_role("region", name="History from the parent thread")
    expect(history.locator("article")).to_have_count(2)
    expect(history).to_contain_text("First question")
    expect(history).not_to_contain_text("Second question")
    send(chat, "A new direction")
    wait_done(bubble(chat, "assistant"))
    expect(chat.locator(".thread-tree li")).to_have_count(2)


def test_inline_rename_enter_saves_and_escape_cancels(chat, fast_demo):
    item = chat.locator(".thread-tree li").first
    item.get_by_role("button", name="Rename").click()
    field = item.get_by_role("textbox", name="Thread name")
    expect(field).to_be_focused()
    field.fill("Harbour plans")
    field.press("Enter")
    expect(item.locator("a")).to_contain_text("Harbour plans")
    expect(chat.locator(".chat-title")).to_contain_text("Harbour plans")
    item.get_by_role("button", name="Rename").click()
    field.fill("Something else")
    field.press("Escape")
    expect(field).to_be_hidden()
    expect(item.locator("a")).to_contain_text("Harbour plans")
    chat.reload()
    expect(chat.locator(".thread-tree li a").first).to_contain_text("Harbour plans")


def test_role_chips_and_mention_autocomplete(chat, fast_demo):
    box = chat.get_by_role("combobox", name="Message", exact=True)
    chat.get_by_role("group", name="Roles").get_by_role("button", name="@visual_architect").click()
    expect(box).to_have_value("@visual_architect ")
    expect(box).to_be_focused()
    box.fill("")
    box.press_sequentially("Ask @dir")
    listbox = chat.get_by_role("listbox", name="Roles to mention")
    expect(listbox).to_be_visible()
    expect(listbox.get_by_role("option")).to_have_count(1)
    box.press("Enter")  # picks, does not send
    expect(box).to_have_value("Ask @director ")
    expect(listbox).to_be_hidden()
    box.press_sequentially("and @")
    expect(listbox.get_by_role("option").first).to_be_visible()
    box.press("ArrowDown")
    box.press("Tab")
    expect(box).to_have_value("Ask @director and @director ")
    box.press_sequentially("@")
    expect(listbox).to_be_visible()
    box.press("Escape")  # closes the list and stops nothing
    expect(listbox).to_be_hidden()
    expect(box).to_be_focused()


def test_settings_apply_on_next_turn_during_a_stream(chat, slow_demo, emulated_anthropic):
    send(chat, "Tell me about the harbour")
    reply = bubble(chat, "assistant")
    expect(reply).to_have_attribute("data-status", "streaming", timeout=scaled(10_000))
    chat.get_by_role("button", name="Session settings").click()
    dialog = chat.get_by_role("dialog")
    expect(dialog.get_by_role("heading", name="Session settings")).to_be_visible()
    model = dialog.get_by_label("Model", exact=True)
    expect(model.locator("option")).to_have_text(["demo-1"])
    dialog.get_by_label("Credential", exact=True).select_option(
        label="Emulated Anthropic · Anthropic"
    )
    expect(model.locator("option", has_text="claude-haiku-4-5")).to_have_count(1)  # reloaded
    model.select_option("claude-haiku-4-5")
    dialog.get_by_role("tab", name="Context").click()
    dialog.get_by_label("Your persona").fill("I make documentaries.")
    dialog.get_by_role("tab", name="Conversation").click()
    dialog.get_by_label("Addressing").select_option("broadcast")
    dialog.get_by_role("button", name="Save").click()
    expect(dialog.get_by_role("button", name="Apply now (restart stream)")).to_be_visible()
    dialog.get_by_role("button", name="Apply on next turn").click()
    expect(dialog).to_be_hidden(timeout=scaled(5_000))
    expect(chat.locator("#addressing")).to_contain_text("Broadcast")
    wait_done(reply)
    session = Session.objects.get(pk=chat.session.pk)
    assert (session.persona, session.addressing_mode) == ("I make documentaries.", "broadcast")
    assert (session.credential, session.model) == (emulated_anthropic, "claude-haiku-4-5")
    message = Message.objects.get(speaker="assistant")
    assert message.alternatives == [] and message.attempt == 1  # it ran once, unchanged
    assert message.provider == "demo"
    expect(chat.locator("#summary-strip")).to_contain_text("Emulated Anthropic")


def test_settings_applied_now_restart_the_stream_and_keep_the_old_text(chat, slow_demo):
    # Still streaming after the settings dialog's five steps, however busy the machine is.
    slow_demo.PARLEY_DEMO_TOKENS_PER_SECOND = 20
    send(chat, "Tell me about the harbour")
    reply = bubble(chat, "assistant")
    expect(reply).to_have_attribute("data-status", "streaming", timeout=scaled(10_000))
    expect(reply).to_contain_text("Demo reply", timeout=scaled(10_000))  # some text has streamed
    chat.get_by_role("button", name="Session settings").click()
    dialog = chat.get_by_role("dialog")
    dialog.get_by_role("tab", name="Context").click()
    dialog.get_by_label("Your persona").fill("I make documentaries.")
    dialog.get_by_role("button", name="Save").click()
    apply_now = dialog.get_by_role("button", name="Apply now (restart stream)")
    expect(apply_now).to_be_visible()
    text = reply.locator(".stream-text")
    shown = len(text.text_content() or "")
    assert shown > 20
    apply_now.click()
    expect(dialog).to_be_hidden(timeout=scaled(5_000))
    # The same bubble streams again from the start (its text shorter than what it had shown);
    # once done, what it had said is an earlier version.
    chat.wait_for_function(
        "([id, shown]) => { const el = document.getElementById(id);"
        " return el && el.textContent.length < shown; }",
        arg=[f"{reply.get_attribute('id')}-text", shown],
        timeout=scaled(15_000),
    )
    wait_done(reply, timeout=scaled(30_000))
    expect(reply.locator(".msg-versions summary")).to_have_text("Earlier versions (1)")
    message = Message.objects.get(speaker="assistant")
    (earlier,) = message.alternatives
    assert earlier["status"] == "interrupted"  # the run that was stopped for the new settings
    old = "".join(part.get("text", "") for part in earlier["content"])
    assert "Demo reply" in old and "Demo reply" in message.text and len(message.text) > len(old)
    reply.locator(".msg-versions summary").click()
    expect(reply.locator(".msg-version")).to_contain_text("from Assistant — no model was called")


def test_leave_during_a_stream_and_come_back_to_the_finished_reply(chat, slow_demo):
    send(chat, "Write me something long")
    expect(bubble(chat, "assistant")).to_have_attribute(
        "data-status", "streaming", timeout=scaled(10_000)
    )
    url = chat.url
    chat.goto("/")
    expect(chat.get_by_role("heading", name="Your sessions")).to_be_visible()
    reply = Message.objects.get(speaker="assistant")
    for _ in range(200):
        reply.refresh_from_db()
        if reply.status == MessageStatus.DONE:
            break
        chat.wait_for_timeout(100)
    chat.goto(url)
    wait_done(bubble(chat, "assistant"), timeout=scaled(5_000))
    expect(bubble(chat, "assistant")).to_contain_text("Close the tab and come back")


def test_session_rename_and_delete_with_confirmation(page, alice, roles):
    session_create(owner=alice, name="Old name")
    log_in(page)
    row = page.locator(".session-row").first
    row.get_by_role("button", name="Rename").click()
    field = row.get_by_role("textbox", name="Session name")
    field.fill("New name")
    field.press("Enter")
    expect(page.get_by_role("link", name="New name")).to_be_visible()
    page.once("dialog", lambda dialog: dialog.dismiss())
    page.get_by_role("button", name="Delete").click()
    expect(page.get_by_role("link", name="New name")).to_be_visible()
    assert Session.objects.filter(name="New name").exists()
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Delete").click()
    expect(page.get_by_role("link", name="New name")).to_have_count(0)
    assert not Session.objects.exists()


HOSTILE = '<img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script>'


def test_hostile_html_is_shown_as_text_and_never_runs(
    page, alice, roles, emulated_anthropic, emulator, fast_demo
):
    Role.objects.filter(handle="visual_architect").update(
        display_name=f"Visual {HOSTILE}", icon="<b>"
    )
    session = session_create(owner=alice, name=f"Session {HOSTILE}")
    thread = session.active_thread
    thread.label = f"Label {HOSTILE}"
    thread.save()
    session.credential = emulated_anthropic
    session.save()
    emulator.script(
        Script(
            text=f"Model says {HOSTILE} and [click](javascript:window.__pwned=3) "
            '<a href="#" onclick="window.__pwned=4">x</a>',
            provider="anthropic",
        )
    )
    dialogs = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    log_in(page)
    page.goto(f"/t/{thread.public_id}/")
    send(page, f"@visual_architect {HOSTILE}")
    reply = bubble(page, "visual_architect")
    wait_done(reply)
    expect(page.get_by_role("article", name="alice")).to_contain_text(
        "<script>window.__pwned=2</script>"
    )
    expect(reply).to_contain_text("Model says")
    expect(page.locator(".thread-tree")).to_contain_text("<script>")
    expect(reply.locator(".speaker")).to_contain_text("<script>")
    page.reload()  # the stored, re-rendered versions too
    wait_done(bubble(page, "visual_architect"))
    page.locator("#transcript a").evaluate_all("els => els.forEach(e => e.click())")
    assert page.evaluate("window.__pwned") is None
    assert page.locator("#transcript script, #transcript img[onerror]").count() == 0
    assert dialogs == []


def test_screenshots_in_light_and_dark(chat, fast_demo, shots):
    """Screenshots for the README (see the `shots` fixture)."""
    target = shots
    from apps.chat.council.posting import message_post
    from apps.chat.records.threads import thread_branch, thread_create, thread_rename

    def another_thread_with_a_branch():
        other = thread_create(session=chat.session)
        thread_rename(thread=other, label="Sound palette for the market")
        first = message_post(thread=other, author=chat.session.owner, text="Sounds?")
        thread_branch(thread=other, message=first.user_message)

    off_the_event_loop(another_thread_with_a_branch)
    chat.reload()  # the sidebar now shows the other thread and its branch
    chat.set_viewport_size({"width": 1280, "height": 900})
    send(chat, "@visual_architect @director how should the harbour scene at dawn open?")
    wait_done(bubble(chat, "director"))
    current = chat.locator(".thread-tree li:has(a[aria-current=page])")
    current.get_by_role("button", name="Rename").click()
    field = current.get_by_role("textbox", name="Thread name")
    field.fill("Harbour at dawn")
    field.press("Enter")
    expect(chat.locator(".chat-title")).to_contain_text("Harbour at dawn")
    box = chat.get_by_role("combobox", name="Message", exact=True)
    box.fill("")
    box.press_sequentially("What should we hear, @sou")
    chat.evaluate("window.scrollTo(0, 0)")
    expect(chat.get_by_role("listbox", name="Roles to mention")).to_be_visible()
    for scheme in ("light", "dark"):
        chat.emulate_media(color_scheme=scheme)
        chat.screenshot(path=str(target / f"chat-desktop-{scheme}.png"))
    box.fill("")
    chat.set_viewport_size({"width": 390, "height": 844})
    chat.evaluate("window.scrollTo(0, document.scrollingElement.scrollHeight)")
    for scheme in ("light", "dark"):
        chat.emulate_media(color_scheme=scheme)
        chat.screenshot(path=str(target / f"chat-phone-{scheme}.png"))
    chat.get_by_role("button", name="Threads").click()
    expect(chat.get_by_role("navigation", name="Threads of this session")).to_be_in_viewport()
    chat.wait_for_timeout(300)  # the drawer's slide
    chat.screenshot(path=str(target / "threads-phone-dark.png"))
    chat.goto("/")
    chat.set_viewport_size({"width": 1280, "height": 900})
    chat.emulate_media(color_scheme="light")
    chat.get_by_role("button", name="New session").click()
    expect(chat.get_by_role("dialog", name="New session")).to_be_visible()
    chat.screenshot(path=str(target / "new-session-light.png"))
    for name in ("chat-desktop-light", "chat-phone-dark", "new-session-light"):
        assert (target / f"{name}.png").stat().st_size > 10_000


def test_a_routing_suggestion_prefills_the_composer(
    page, alice, roles, emulated_anthropic, emulator
):
    session = session_create(owner=alice, name="Suggestions")
    session.credential = emulated_anthropic
    session.save()
    arguments = {"handle": "sound_designer", "message": "What does the harbour sound like?"}
    emulator.script(
        # The question's shape is unclear to the rules: the cheap model is asked once.
        Script(text="none", match="Classify the shape"),
        Script(text="", tool_calls=[{"name": "suggest_route", "arguments": arguments}]),
        Script(text="That is a question for the sound designer."),
    )
    log_in(page)
    page.goto(f"/t/{session.active_thread.public_id}/")
    send(page, "What should the harbour sound like?")
    reply = bubble(page, "assistant")
    wait_done(reply)
    expect(reply.get_by_role("list", name="Tools used")).to_contain_text("suggest_route")
    reply.get_by_role("button", name="Ask @sound_designer").click()
    box = page.get_by_role("combobox", name="Message", exact=True)
    expect(box).to_have_value("@sound_designer What does the harbour sound like? ")
    expect(box).to_be_focused()


def test_regenerate_export_clear_and_new_chat(chat, fast_demo):
    send(chat, "Outline the harbour sequence")
    reply = bubble(chat, "assistant")
    wait_done(reply)
    reply.get_by_role("button", name="Regenerate").click()
    expect(reply).to_contain_text("version 2", timeout=scaled(15_000))
    wait_done(reply)
    reply.get_by_text("Earlier versions (1)").click()
    expect(reply.get_by_role("region", name="Version 1")).to_contain_text("Demo reply")

    with chat.expect_download() as download:
        chat.get_by_text("Export").click()
        chat.get_by_role("link", name="Markdown").click()
    text = Path(download.value.path()).read_text()
    assert "## You" in text and "Outline the harbour sequence" in text

    chat.once("dialog", lambda dialog: dialog.dismiss())
    chat.get_by_label("More chat actions").click()
    chat.get_by_role("button", name="Clear chat…").click()
    expect(chat.locator("#transcript article")).to_have_count(2)
    chat.once("dialog", lambda dialog: dialog.accept())
    chat.get_by_role("button", name="Clear chat…").click()
    expect(chat.locator("#transcript article")).to_have_count(0)
    assert not Message.objects.filter(thread=chat.session.active_thread).exists()

    old_url = chat.url
    chat.get_by_role("button", name="New chat").click()
    expect(chat).not_to_have_url(old_url)
    expect(chat.get_by_role("combobox", name="Message", exact=True)).to_be_focused()
    expect(chat.locator(".thread-tree li")).to_have_count(2)


def test_the_keyboard_reaches_every_control(chat, fast_demo):
    box = chat.get_by_role("combobox", name="Message", exact=True)
    box.focus()
    box.press("Tab")
    expect(chat.get_by_role("button", name="Attach images or files")).to_be_focused()
    chat.keyboard.press("Tab")
    expect(chat.get_by_role("button", name="Send")).to_be_focused()
    expect(chat.get_by_role("button", name="Stop")).to_be_hidden()  # nothing runs
    chat.get_by_role("button", name="New chat").focus()
    chat.keyboard.press("Tab")
    expect(chat.get_by_label("More chat actions")).to_be_focused()
    chat.locator(".thread-tree a").first.focus()
    chat.keyboard.press("Tab")
    rename = chat.get_by_role("button", name="Rename").first
    expect(rename).to_be_focused()
    chat.keyboard.press("Enter")
    expect(chat.get_by_role("textbox", name="Thread name")).to_be_focused()
    chat.keyboard.press("Escape")
    # Focus is drawn: the focused control has an outline.
    outline = rename.evaluate("el => getComputedStyle(el).outlineStyle")
    assert outline != "none"


def test_a_thread_made_in_one_tab_appears_in_the_others_sidebar(chat, fast_demo):
    first_url = chat.url
    other = chat.context.new_page()
    other.goto(first_url)
    expect(other.locator("#sync-state")).to_have_attribute("data-synced", "true")
    chat.get_by_role("button", name="New chat").click()
    expect(chat).not_to_have_url(first_url)
    # The other tab lists the new thread and still marks its own as current.
    expect(other.locator(".thread-tree li")).to_have_count(2)
    current = other.locator(".thread-tree a[aria-current=page]")
    expect(current).to_have_count(1)
    expect(current).to_have_attribute("href", re.compile(str(chat.session.active_thread.public_id)))
    # A rename open in a sidebar is not swapped away under the typist: the new tree waits
    # until the rename closes, and keeps names pushed in the meantime.
    item = other.locator(".thread-tree li").last
    item.get_by_role("button", name="Rename").click()
    item.get_by_role("textbox", name="Thread name").fill("Half-typed")
    chat.get_by_role("button", name="New chat").click()
    expect(chat.locator(".thread-tree li")).to_have_count(3)
    from apps.chat.records.threads import thread_rename

    first_thread = chat.session.active_thread
    # Pushed after the tree, so once it shows, the tree's push has been handled too.
    off_the_event_loop(lambda: thread_rename(thread=first_thread, label="Renamed <i>"))
    expect(other.locator(f"#thread-label-{first_thread.public_id}")).to_have_text("Renamed <i>")
    expect(other.get_by_role("textbox", name="Thread name")).to_have_value("Half-typed")
    expect(other.locator(".thread-tree li")).to_have_count(2)
    other.keyboard.press("Escape")
    expect(other.locator(".thread-tree li")).to_have_count(3)
    expect(other.locator(f"#thread-label-{first_thread.public_id}")).to_have_text("Renamed <i>")
    expect(other.locator(".thread-tree a[aria-current=page]")).to_have_count(1)
    expect(other.locator(".thread-tree a[aria-current=page]")).to_contain_text("Renamed <i>")
    other.close()


def test_a_message_sent_while_replies_stream_is_queued_then_answered_and_send_now_jumps(
    chat, slow_demo
):
    send(chat, "@visual_architect how does the harbour scene open?")
    visual = bubble(chat, "visual_architect")
    expect(visual).to_have_attribute("data-status", "streaming", timeout=scaled(10_000))
    send(chat, "@sound_designer and what do we hear?")
    queue = chat.get_by_role("region", name="Queued messages")
    expect(queue).to_contain_text("and what do we hear?")
    expect(queue.locator(".msg-state")).to_have_text("queued")
    # It waits: no bubble of its own while the turn runs.
    expect(bubble(chat, "sound_designer")).to_have_count(0)
    wait_done(visual, timeout=scaled(30_000))
    sound = bubble(chat, "sound_designer")
    wait_done(sound, timeout=scaled(30_000))
    expect(queue).to_have_count(0)
    speakers = chat.locator("#transcript article").evaluate_all(
        "els => els.map(e => e.dataset.speaker)"
    )
    assert speakers == ["user", "visual_architect", "user", "sound_designer"]

    # Send now: the running reply stops with its text kept, and the queued message runs.
    send(chat, "@actor_agent a long monologue, please")
    actor = bubble(chat, "actor_agent")
    expect(actor.locator(".stream-text")).to_contain_text(re.compile(r"\w"), timeout=scaled(10_000))
    send(chat, "@director cut it short")
    chat.get_by_role("button", name=re.compile("Send now: @director cut it short")).click()
    expect(actor).to_have_attribute("data-status", "interrupted", timeout=scaled(10_000))
    wait_done(bubble(chat, "director"), timeout=scaled(30_000))
    actor_reply = Message.objects.get(speaker="actor_agent")
    assert actor_reply.status == MessageStatus.INTERRUPTED and actor_reply.text


def test_the_mention_list_ranks_handles_that_start_with_what_was_typed_first(chat):
    box = chat.get_by_role("combobox", name="Message", exact=True)
    box.press_sequentially("@s")
    options = chat.locator("#mention-list [role=option]")
    expect(options.first).to_have_attribute("id", "mention-sound_designer")
    box.press("Enter")  # picks the preselected one
    expect(box).to_have_value("@sound_designer ")
