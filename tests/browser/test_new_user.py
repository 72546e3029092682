"""What a new user trips over (issue 14), in Chromium: each test failed before its fix."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.browser.test_group_chat import bubble, wait_done

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_text_typed_right_after_enter_is_kept(chat, fast_demo):
    box = chat.get_by_role("textbox", name="Message", exact=True)
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
    box = chat.get_by_role("textbox", name="Message", exact=True)
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
        label="Local · OpenAI-compatible server (Ollama, vLLM, LM Studio…)"
    )
    expect(model).not_to_have_value("claude-sonnet-5")
    expect(model.locator("option", has_text="claude-sonnet-5")).to_have_count(0)
    dialog.get_by_role("button", name="Save").click()
    expect(dialog).to_be_hidden(timeout=5_000)
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
    box = chat.get_by_role("textbox", name="Message", exact=True)
    box.fill("Please check /home/alice/secrets/prod.env with token=ghp_abcdEFGH1234ijklMNOP5678")
    box.press("Enter")
    title = chat.locator(".chat-title")
    expect(title).to_have_text("Check prod.env")
    expect(chat.locator("#thread-tree")).to_contain_text("Check prod.env")
    expect(chat.locator("#thread-tree")).not_to_contain_text("secrets")
    expect(chat.locator("#thread-tree")).not_to_contain_text("ghp_")


def test_a_second_message_sent_before_the_first_is_answered_is_not_dropped(chat, fast_demo):
    box = chat.get_by_role("textbox", name="Message", exact=True)
    box.fill("first of two")
    box.press("Enter")
    box.fill("second of two")
    box.press("Enter")  # the first request may still be on its way
    users = chat.locator("#transcript article[data-speaker=user]")
    expect(users).to_have_count(2, timeout=20_000)
    expect(users.first).to_contain_text("first of two")
    expect(users.last).to_contain_text("second of two")
    expect(box).to_have_value("")
