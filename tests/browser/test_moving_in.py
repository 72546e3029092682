"""Moving in and showing others, in Chromium: an export imported with its preview, a live
progress bar and Cancel; character cards brought in as roles; a thread shared by link and read
by a visitor who is not logged in, following it live."""

from __future__ import annotations

import json
import os
import re

import pytest
from playwright.sync_api import expect

from apps.chat.models import Session
from apps.imports.models import ImportedConversation
from apps.roles.models import Role
from tests.browser.test_live_chat import log_in
from tests.deadlines import scaled
from tests.imports.exports import chatgpt_trip, claude_conversation
from tests.roles.test_cards import V2, card_png, v3

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.mark.parametrize("size", [(1280, 800), (390, 844)], ids=["desktop", "phone"])
def test_an_export_is_previewed_imported_with_a_progress_bar_and_cancelled(
    page, alice, roles, shots, size
):
    page.set_viewport_size({"width": size[0], "height": size[1]})
    log_in(page)
    page.locator("summary[aria-label^='Account menu']").click()
    page.get_by_role("link", name="Import").click()
    expect(page.get_by_role("heading", name="Import")).to_be_visible()
    # Enough conversations that the import is still running when Cancel is pressed.
    many = [chatgpt_trip(f"c-{n}") for n in range(1000)] + [claude_conversation()]
    page.get_by_label("Export file").set_input_files(
        files=[{"name": "conversations.json", "mimeType": "application/json",
                "buffer": json.dumps(many).encode()}]
    )  # fmt: skip
    page.get_by_role("button", name="Read the file").click()
    totals = page.locator(".import-totals")
    expect(totals).to_contain_text(
        "1,001 sessions · 7,002 messages · 2,000 branches · 1 attachment · from ChatGPT, Claude",
        timeout=scaled(30_000),
    )
    expect(page.get_by_text("Tool output (code runs, searches, browsing) (1,000)")).to_be_visible()
    expect(page.get_by_label(re.compile("^gpt-4o"))).to_have_value("new")
    page.screenshot(path=shots / f"import-preview-{size[0]}.png", full_page=True)

    page.get_by_role("button", name="Import 1,001 conversations").click()
    bar = page.get_by_role("progressbar", name="Import progress")
    expect(bar).to_be_visible()
    expect(page.get_by_role("status")).to_contain_text(re.compile(r"Importing… [1-9]"))
    if os.environ.get("PARLEY_SCREENSHOTS"):  # only for the docs: it costs the import time
        page.screenshot(path=shots / f"import-progress-{size[0]}.png")
    page.get_by_role("button", name="Cancel").click()
    expect(page.get_by_role("status")).to_contain_text("Cancelled.", timeout=scaled(30_000))
    made = ImportedConversation.objects.filter(owner=alice).count()
    assert 1 <= made < 1001 and Session.objects.filter(owner=alice).count() == made
    # The sessions made are listed, and open.
    page.locator(".import-sessions a").first.click()
    expect(page.get_by_role("article").first).to_contain_text("Plan a trip to Lisbon")


def test_character_cards_become_roles_on_the_roles_page(page, alice, roles, shots):
    page.set_viewport_size({"width": 390, "height": 844})
    log_in(page)
    page.goto("/roles/")
    page.get_by_label("Character cards").set_input_files(
        files=[
            {"name": "seraphina.png", "mimeType": "image/png", "buffer": card_png(v3(V2))},
            {"name": "bard.json", "mimeType": "application/json",
             "buffer": json.dumps({"name": "Bard <i>the loud</i>", "description": "x"}).encode()},
            {"name": "holiday.png", "mimeType": "image/png", "buffer": b"\x89PNG\r\n\x1a\nnope"},
        ]
    )  # fmt: skip
    page.get_by_label(re.compile("^Pack name")).fill("Tavern")
    page.get_by_role("button", name="Import cards").click()
    expect(page.get_by_role("status")).to_contain_text("Made 2 roles")
    expect(page.locator(".cards-report .form-error")).to_contain_text("holiday.png")
    row = page.locator(".role-list li", has_text="Seraphina")
    expect(row.locator("img")).to_be_visible()  # its picture
    expect(page.locator(".role-list li", has_text="Bard <i>the loud</i>")).to_be_visible()
    page.screenshot(path=shots / "roles-cards-390.png", full_page=True)
    # The new role is offered when starting a session.
    page.goto("/")
    expect(page.locator("#create-roles")).to_contain_text("@seraphina")
    assert Role.objects.get(handle="seraphina").owner == alice


def test_a_thread_shared_by_link_is_read_live_by_a_visitor(
    page, browser_session, alice, roles, fast_demo, shots, asgi_server
):
    from apps.chat.records.sessions import session_create

    session = session_create(owner=alice, name="Harbour film")
    log_in(page)
    page.goto(f"/t/{session.active_thread.public_id}/")
    box = page.get_by_role("combobox", name="Message", exact=True)
    box.fill("@director open on the harbour")
    box.press("Enter")
    expect(page.get_by_role("article", name=re.compile("Director"))).to_have_attribute(
        "data-status", "done", timeout=scaled(20_000)
    )
    # Sharing is its own dialog, from the Export menu or the header's Share, and it fits.
    for width, height in ((1280, 800), (390, 844)):
        page.set_viewport_size({"width": width, "height": height})
        if width > 400:  # the header's Share (a phone's header has room for it in Export)
            page.get_by_role("button", name="Share", exact=True).click()
        else:
            page.locator(".share-menu summary").click()
            page.get_by_role("button", name="Share a read-only link…").click()
        dialog = page.get_by_role("dialog", name="Share a read-only link")
        expect(dialog.get_by_label("Show")).to_be_in_viewport(ratio=1)
        form = dialog.locator("form")
        sizes = form.evaluate("f => [f.scrollWidth, f.clientWidth]")
        assert sizes[0] <= sizes[1], f"{width} px: content {sizes[0]} px in {sizes[1]} px"
        if width > 400:
            dialog.get_by_role("button", name="Close").click()
    dialog.get_by_label("Show").select_option("live")
    dialog.get_by_role("button", name="Make the link").click()
    link = dialog.get_by_label("The shared link")
    expect(dialog.get_by_role("button", name="Copy")).to_be_in_viewport(ratio=1)
    url = link.input_value()
    assert "/shared/" in url
    # The whole link shows (it wraps), and Copy copies it.
    assert link.evaluate(
        "e => e.scrollHeight <= e.clientHeight + 1 && e.scrollWidth <= e.clientWidth"
    )
    dialog.screenshot(path=str(shots / "share-dialog-390.png"))
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    dialog.get_by_role("button", name="Copy").click()
    expect(dialog.get_by_role("button", name="Copied")).to_be_visible()
    assert page.evaluate("navigator.clipboard.readText()") == url
    dialog.get_by_role("button", name="Close").click()
    page.set_viewport_size({"width": 1280, "height": 800})

    visitor_context = browser_session.new_context(viewport={"width": 390, "height": 844})
    visitor = visitor_context.new_page()
    try:
        visitor.goto(url)
        expect(visitor.get_by_role("heading", level=1)).to_be_visible()
        expect(visitor.get_by_role("article", name="Director")).to_be_visible()
        expect(visitor.get_by_role("article", name="alice")).to_contain_text("open on the harbour")
        # The thread goes on; the visitor's page follows it.
        box.fill("@director and the last shot?")
        box.press("Enter")
        expect(visitor.get_by_role("article", name="alice").nth(1)).to_contain_text(
            "and the last shot?", timeout=scaled(15_000)
        )
        expect(visitor.get_by_role("article", name="Director")).to_have_count(
            2, timeout=scaled(15_000)
        )
        visitor.screenshot(path=shots / "shared-thread-390.png", full_page=True)
        # Revoked, the visitor's page says so at its next look.
        page.goto("/account/shared/")
        page.once("dialog", lambda dialog: dialog.accept())
        page.get_by_role("button", name=re.compile("^Revoke")).click()
        expect(visitor.get_by_text("This link was revoked or has expired")).to_be_visible(
            timeout=scaled(15_000)
        )
        assert visitor.goto(url).status == 404
    finally:
        browser_session.close_context(visitor_context)
