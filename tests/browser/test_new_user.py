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
