"""What a new user trips over (issue 14), in Chromium: each test failed before its fix."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.browser.test_group_chat import bubble, off_the_event_loop, send, wait_done
from tests.deadlines import scaled

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_text_typed_right_after_enter_is_kept(chat, fast_demo):
    box = chat.get_by_role("combobox", name="Message", exact=True)
    box.fill("first message")
    box.press("Enter")
    box.press_sequentially("next thought", delay=25)  # typed while the server answers
    expect(chat.locator("#transcript article[data-speaker=user]")).to_have_count(1)
    wait_done(bubble(chat, "assistant"))
    expect(box).to_have_value("next thought")
    box.press("Enter")  # and it is a message of its own, not a duplicate of the first
    expect(chat.locator("#transcript article[data-speaker=user]")).to_have_count(2)
    expect(chat.locator("#transcript article[data-speaker=user]").last).to_contain_text(
        "next thought"
    )
    expect(box).to_have_value("")


def test_line_breaks_stay_in_a_sent_message(chat, fast_demo):
    box = chat.get_by_role("combobox", name="Message", exact=True)
    box.fill("line one\nline two")
    box.press("Enter")
    sent = chat.locator("#transcript article[data-speaker=user] .markdown")
    expect(sent.locator("br")).to_have_count(1)
    expect(sent).to_contain_text("line one")


def test_switching_to_another_providers_credential_resets_the_model(
    chat, emulated_anthropic, emulator
):
    from apps.chat.models import Session
    from apps.chat.records.sessions import session_set_provider
    from apps.providers.services import credential_save

    session_set_provider(
        session=chat.session, credential=emulated_anthropic, model="claude-sonnet-5"
    )
    credential_save(
        owner=chat.session.owner, name="Local", provider="openai_compatible",
        base_url=emulator.url + "/v1", api_key="",
    )  # fmt: skip
    chat.reload()
    chat.get_by_role("button", name="Session settings").click()
    dialog = chat.get_by_role("dialog")
    model = dialog.get_by_label("Model", exact=True)
    expect(model).to_have_value("claude-sonnet-5")  # the saved model, with its credential
    dialog.get_by_label("Credential", exact=True).select_option(
        label="Local · OpenAI-compatible server"
    )
    expect(model).not_to_have_value("claude-sonnet-5")
    expect(model.locator("option", has_text="claude-sonnet-5")).to_have_count(0)
    dialog.get_by_role("button", name="Save").click()
    expect(dialog).to_be_hidden(timeout=scaled(5_000))
    session = Session.objects.get(pk=chat.session.pk)
    assert session.credential.name == "Local" and not session.model.startswith("claude")


def test_session_rename_focuses_the_field_esc_cancels_and_enter_then_saves(page, alice, roles):
    from apps.chat.models import Session
    from apps.chat.records.sessions import session_create
    from tests.browser.test_live_chat import log_in

    session_create(owner=alice, name="Harbour film")
    log_in(page)
    rename = page.get_by_role("button", name="Rename session Harbour film")
    rename.click()
    field = page.locator(".session-row").get_by_role("textbox", name="Session name")
    expect(field).to_be_focused()
    page.keyboard.type("Cancelled name")
    page.keyboard.press("Escape")
    expect(field).to_be_hidden()
    expect(rename).to_be_focused()
    rename.click()
    expect(field).to_have_value("Harbour film")  # the cancelled text is gone
    field.fill("Lighthouse film")
    field.press("Enter")
    expect(page.get_by_role("link", name="Lighthouse film")).to_be_visible()
    assert Session.objects.get().name == "Lighthouse film"
    # Buttons that repeat per row say which row they act on.
    expect(page.get_by_role("button", name="Delete session Lighthouse film")).to_have_count(1)


def test_thread_names_are_title_case_and_keep_no_paths_or_secrets(chat, fast_demo):
    box = chat.get_by_role("combobox", name="Message", exact=True)
    box.fill("Please check /home/alice/secrets/prod.env with token=ghp_abcdEFGH1234ijklMNOP5678")
    box.press("Enter")
    title = chat.locator(".chat-title")
    expect(title).to_have_text("Check prod.env")
    expect(chat.locator("#thread-tree")).to_contain_text("Check prod.env")
    expect(chat.locator("#thread-tree")).not_to_contain_text("secrets")
    expect(chat.locator("#thread-tree")).not_to_contain_text("ghp_")


def test_a_second_message_sent_before_the_first_is_answered_is_not_dropped(chat, fast_demo):
    box = chat.get_by_role("combobox", name="Message", exact=True)
    box.fill("first of two")
    box.press("Enter")
    box.fill("second of two")
    box.press("Enter")  # the first request may still be on its way
    users = chat.locator("#transcript article[data-speaker=user]")
    expect(users).to_have_count(2, timeout=scaled(20_000))
    expect(users.first).to_contain_text("first of two")
    expect(users.last).to_contain_text("second of two")
    expect(box).to_have_value("")


def test_enter_right_after_the_composer_is_replaced_still_sends(chat, fast_demo):
    """The server's answer replaces the composer; htmx wires the new one up only when it
    settles. An Enter in between must send, not vanish."""
    chat.evaluate("htmx.config.defaultSettleDelay = 1500")  # widen the window to see it
    box = chat.get_by_role("combobox", name="Message", exact=True)
    chat.locator("#composer").evaluate("form => { form.dataset.old = '1'; }")
    box.fill("first of two")
    box.press("Enter")
    chat.wait_for_function("!document.querySelector('#composer[data-old]')")  # swapped
    box.fill("second of two")
    box.press("Enter")  # within the settle window
    users = chat.locator("#transcript article[data-speaker=user]")
    expect(users).to_have_count(2, timeout=scaled(20_000))
    expect(users.last).to_contain_text("second of two")


@pytest.mark.parametrize("width", [1280, 390])
def test_the_settings_dialog_fits_with_close_and_the_apply_choice_in_view(chat, slow_demo, width):
    chat.set_viewport_size({"width": width, "height": 800})
    chat.get_by_role("button", name="Session settings").click()
    dialog = chat.get_by_role("dialog", name="Session settings")
    expect(dialog.get_by_role("button", name="Save")).to_be_in_viewport()
    form = dialog.locator("form.settings-form")
    sizes = form.evaluate("f => [f.scrollWidth, f.clientWidth]")
    assert sizes[0] <= sizes[1], f"content {sizes[0]} px wide in a {sizes[1]} px dialog"
    close = dialog.get_by_role("button", name="Close")
    expect(close).to_be_in_viewport(ratio=1)
    form.evaluate("f => f.scrollTo(0, f.scrollHeight)")  # the header stays, sticky
    expect(close).to_be_in_viewport(ratio=1)
    dialog.get_by_role("button", name="Cancel").click()

    # Slow enough to be streaming still when Save is pressed, however busy the machine.
    slow_demo.PARLEY_DEMO_TOKENS_PER_SECOND = 8
    send(chat, "A long answer, please")
    expect(bubble(chat, "assistant")).to_have_attribute("data-status", "streaming")
    chat.get_by_role("button", name="Session settings").click()
    dialog.get_by_role("button", name="Save").click()
    expect(dialog.get_by_role("button", name="Apply on next turn")).to_be_in_viewport(ratio=1)
    expect(dialog.get_by_role("button", name="Apply now (restart stream)")).to_be_in_viewport()


def test_two_branches_from_one_message_differ_where_the_sidebar_shows_them(chat, fast_demo):
    send(chat, "How should the harbour scene open at dawn with the fishing boats?")
    wait_done(bubble(chat, "assistant"))
    thread_url = chat.url
    for _ in range(2):
        chat.goto(thread_url)
        bubble(chat, "assistant").get_by_role("button", name="Branch from here").click()
        expect(chat).not_to_have_url(thread_url)
    labels = chat.locator(".thread-tree .thread-item > a")
    expect(labels).to_have_count(3)
    # What the 260 px sidebar shows of each name: the part before its ellipsis.
    shown = labels.evaluate_all(
        """links => links.map(a => {
            const label = a.querySelector('.thread-label');
            const range = document.createRange();
            range.selectNodeContents(label);
            const right = a.getBoundingClientRect().right;
            let text = '';
            for (const ch of label.textContent) {
                text += ch;
                range.setStart(label.firstChild, 0); range.setEnd(label.firstChild, text.length);
                if (range.getBoundingClientRect().right > right - 12) break;
            }
            return text;
        })"""
    )
    assert len(set(shown)) == 3, shown
    assert sorted(name[:8] for name in shown[1:]) == ["Branch 1", "Branch 2"], shown


def test_a_phone_gets_a_one_line_header_a_thread_drawer_and_a_folded_role_picker(chat):
    chat.set_viewport_size({"width": 390, "height": 844})
    chat.reload()
    header = chat.locator("header.topbar")
    assert header.bounding_box()["height"] < 56
    session_name = chat.locator(".topbar-session")
    assert session_name.evaluate("e => e.getClientRects().length") == 1
    box = chat.get_by_role("combobox", name="Message", exact=True)
    assert box.bounding_box()["width"] > 300
    picker = chat.get_by_role("group", name="Roles")
    expect(picker).to_be_hidden()  # folded: one line instead of six rows of chips
    chat.locator("#role-drawer > summary").click()
    expect(picker).to_be_visible()
    threads = chat.get_by_role("navigation", name="Threads of this session")
    expect(threads).not_to_be_in_viewport()
    toggle = chat.get_by_role("button", name="Threads", exact=True)
    expect(toggle).to_have_attribute("aria-expanded", "false")
    toggle.click()
    expect(threads).to_be_in_viewport()
    expect(toggle).to_have_attribute("aria-expanded", "true")
    chat.keyboard.press("Escape")
    expect(threads).not_to_be_in_viewport()
    expect(toggle).to_be_focused()
    toggle.click()
    chat.get_by_role("button", name="Close threads").click()
    expect(threads).not_to_be_in_viewport()
    # The account links moved into the account menu.
    chat.get_by_label("Account menu for alice").click()
    expect(chat.get_by_role("link", name="Credentials")).to_be_visible()
    # Every page fits the width: nothing scrolls sideways.
    assert chat.evaluate("document.documentElement.scrollWidth") <= 390


def test_chips_combobox_and_announcements_for_screen_readers(chat, fast_demo):
    send(chat, "@director what do you think?")
    wait_done(bubble(chat, "director"))
    expect(chat.get_by_role("button", name="@director, sticky")).to_be_visible()
    off_the_event_loop(lambda: mute(chat.session, "sound_designer"))
    expect(chat.get_by_role("button", name="@sound_designer, muted")).to_be_visible()
    box = chat.get_by_role("combobox", name="Message", exact=True)
    expect(box).to_have_attribute("aria-expanded", "false")
    box.press_sequentially("@ed")
    expect(box).to_have_attribute("aria-expanded", "true")
    expect(box).to_have_attribute("aria-activedescendant", "mention-editorial_architect")
    box.press("Escape")
    expect(box).to_have_attribute("aria-expanded", "false")
    # The transcript is not a live region (every streamed word would be read out); a status
    # line says when a reply starts and when it has settled.
    assert chat.locator("#transcript").get_attribute("aria-live") is None
    box.fill("@assistant again")
    box.press("Enter")
    expect(chat.get_by_role("status").filter(has_text="Assistant has replied.")).to_have_count(1)


def mute(session, handle):
    from apps.chat.council.commands import run_command

    run_command(thread=session.active_thread, author=session.owner, text=f"/mute @{handle}")


def test_keyboard_shortcuts_and_the_new_chat_split_button(chat, fast_demo):
    send(chat, "Outline the harbour sequence")
    wait_done(bubble(chat, "assistant"))
    chat.locator("body").click(position={"x": 5, "y": 300})  # nothing focused
    chat.keyboard.press("?")
    shortcuts = chat.get_by_role("dialog", name="Keyboard shortcuts")
    expect(shortcuts).to_be_visible()
    expect(shortcuts).to_contain_text("New chat")
    chat.keyboard.press("Escape")
    expect(shortcuts).to_be_hidden()
    chat.keyboard.press("g")
    chat.keyboard.press("s")
    expect(chat.get_by_role("dialog", name="Session settings")).to_be_visible()
    chat.keyboard.press("Escape")
    chat.keyboard.press("/")
    box = chat.get_by_role("combobox", name="Message", exact=True)
    expect(box).to_be_focused()
    expect(box).to_have_value("")  # the slash opened nothing and typed nothing
    box.blur()
    chat.get_by_label("More chat actions").click()
    chat.once("dialog", lambda dialog: dialog.dismiss())
    chat.get_by_role("button", name="Clear chat…").click()
    expect(chat.locator("#transcript article")).to_have_count(2)
    thread_url = chat.url
    chat.locator("body").click(position={"x": 5, "y": 300})
    chat.keyboard.press("g")
    chat.keyboard.press("n")
    expect(chat).not_to_have_url(thread_url)
    expect(chat.locator(".thread-tree li")).to_have_count(2)


def test_a_thread_a_greeting_could_not_name_is_named_from_its_first_reply(chat, fast_demo):
    send(chat, "hi")
    wait_done(bubble(chat, "assistant"))
    title = chat.locator(".chat-title")
    expect(title).not_to_have_text("Untitled chat")
    expect(title).to_have_text(re.compile(r"^[A-Z]"))


def test_slash_opens_the_command_list(chat, fast_demo):
    box = chat.get_by_role("combobox", name="Message", exact=True)
    box.press("/")
    commands = chat.get_by_role("listbox", name="Slash commands")
    expect(commands).to_be_visible()
    expect(commands.get_by_role("option", name="/help — list the commands")).to_be_visible()
    expect(box).to_have_attribute("aria-expanded", "true")
    box.press_sequentially("mu")
    expect(commands.get_by_role("option")).to_have_count(1)
    box.press("Backspace")
    box.press("Backspace")
    box.press_sequentially("he")
    box.press("Enter")  # picks /help; the next Enter sends it
    expect(box).to_have_value("/help ")
    expect(commands).to_be_hidden()
    box.press("Enter")
    expect(bubble(chat, "parley")).to_contain_text("/mute @handle")
    # Not at the start of a message, a slash is only a slash.
    box.press_sequentially("either/or")
    expect(chat.get_by_role("listbox")).to_be_hidden()
