"""The rough edges a demanding user found, at 1280x800 and 390x844: search across sessions,
readable thread names, a header that stays, a one-line summary, sectioned settings, the New
session dialog and the sessions list on a phone, the MCP servers page, and a tab on screen
that counts as reading. Screenshots go where the `shots` fixture says."""

from __future__ import annotations

import re

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from apps.chat.models import Message, MessageStatus, Thread
from apps.chat.records.sessions import session_create
from apps.chat.records.threads import thread_rename
from bench.long_threads import thread_fill
from tests.browser.test_group_chat import bubble, send, wait_done
from tests.browser.test_live_chat import log_in
from tests.deadlines import scaled

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
SIZES = [(1280, 800), (390, 844)]
ONE_LINE_PX = 30  # a line of small text with its padding


def said(thread, text: str, speaker: str = "director") -> None:
    seq = Thread.objects.get(pk=thread.pk).next_seq
    Message.objects.create(
        thread=thread, seq=seq, speaker=speaker, status=MessageStatus.DONE,
        content=[{"type": "text", "text": text}], finished_at=timezone.now(),
    )  # fmt: skip
    Thread.objects.filter(pk=thread.pk).update(next_seq=seq + 1)


@pytest.mark.parametrize("size", SIZES)
def test_the_sessions_list_searches_every_session_and_fits_a_phone(page, alice, roles, size, shots):
    film = session_create(owner=alice, name="Harbour film with a rather long session name")
    shop = session_create(owner=alice, name="Shop redesign")
    said(film.active_thread, "**The lighthouse** beam at dawn, over `the bay`.")
    said(shop.active_thread, "A [lighthouse logo](https://example.com/l.png) for the shop.")
    page.set_viewport_size({"width": size[0], "height": size[1]})
    log_in(page)
    page.get_by_role("searchbox", name="Search all your sessions").fill("lighth")
    results = page.get_by_role("region", name="Search results")
    expect(results.get_by_role("region", name="Matches in Shop redesign")).to_be_visible()
    film_hits = results.get_by_role("region", name=f"Matches in {film.name}")
    expect(film_hits.locator("mark")).to_have_text("lighthouse")
    expect(film_hits).to_contain_text("The lighthouse beam at dawn, over the bay.")
    expect(results).not_to_contain_text("**")
    expect(results).not_to_contain_text("](")
    page.screenshot(path=str(shots / f"search-{size[0]}.png"))
    film_hits.get_by_role("link").first.click()
    expect(page.locator("article.msg--role").first).to_contain_text("The lighthouse beam")

    # The list itself: each session's actions on one line, its badge beside its name.
    page.goto("/")
    row = page.locator(".session-list li").filter(has_text="Shop redesign")
    rename = row.get_by_role("button", name="Rename session Shop redesign")
    delete = row.get_by_role("button", name="Delete session Shop redesign")
    assert abs(rename.bounding_box()["y"] - delete.bounding_box()["y"]) < 4
    name, badge = row.locator(".session-main > a"), row.locator(".unread-badge")
    expect(badge).to_be_visible()  # the director's reply is unread
    assert badge.bounding_box()["y"] - name.bounding_box()["y"] < 12  # beside the name
    expect(page.get_by_role("link", name="MCP servers").last).to_be_visible()


def test_thread_names_read_whole_in_the_sidebar(chat, shots):
    name = "Plan Opening Scene With The Harbour Bell"
    thread_rename(thread=chat.session.active_thread, label=name)
    chat.set_viewport_size({"width": 1280, "height": 800})
    chat.reload()
    link = chat.locator(".thread-tree .thread-item > a").first
    expect(link).to_contain_text(name)
    clipped = link.evaluate("a => a.scrollHeight > a.clientHeight + 1")
    assert not clipped, "the thread's name is cut off in the sidebar"
    lines = link.locator(".thread-label").evaluate(
        "el => new Set(Array.from(el.getClientRects(), r => Math.round(r.top))).size"
    )
    assert lines <= 2


# Resolves once nothing has scrolled (the page or any scroller in it) for ten frames: a wheel's
# smooth scroll has ended, or there was nothing to scroll.
SCROLL_SETTLED = """() => new Promise(done => {
    const where = () => Array.from(document.querySelectorAll("*"), el => el.scrollTop).join()
        + window.scrollY;
    let last = where(), still = 0;
    (function frame() {
        const now = where();
        still = now === last ? still + 1 : 0;
        last = now;
        if (still >= 10) done(); else requestAnimationFrame(frame);
    })();
})"""


@pytest.mark.parametrize("size", SIZES)
def test_the_thread_header_stays_in_view_with_a_one_line_summary(chat, fast_demo, size, shots):
    thread = chat.session.active_thread
    thread_fill(thread, 60)
    thread.label = (
        "A very long thread title about the harbour scene at dawn and every shot after it"
    )
    thread.save(update_fields=["label"])
    chat.set_viewport_size({"width": size[0], "height": size[1]})
    chat.reload()
    title, new_chat = chat.locator(".chat-title"), chat.get_by_role("button", name="New chat")
    # Every action fits on the header's line: none hides past the edge (a phone once showed
    # "Expo" of Export, the rest scrolled out of sight).
    tools = chat.locator(".chat-tools")
    assert tools.evaluate("el => el.scrollWidth - el.clientWidth") <= 0
    # A long title ends in an ellipsis on one line; the actions stay on theirs.
    assert title.bounding_box()["height"] <= ONE_LINE_PX
    assert tools.bounding_box()["height"] <= ONE_LINE_PX + 8, "the header's actions wrapped"
    expect(tools.get_by_text("Export", exact=True)).to_be_in_viewport(ratio=1)
    expect(chat.get_by_role("button", name="Session settings")).to_be_visible()
    summary = chat.locator("#summary-strip")
    line = summary.locator("summary")
    assert line.bounding_box()["height"] <= ONE_LINE_PX
    expect(line).to_contain_text("cache")
    expect(summary.get_by_text("Avg first token")).to_be_hidden()
    chat.evaluate("window.scrollTo(0, 0)")
    chat.mouse.wheel(0, 4000)
    chat.evaluate(SCROLL_SETTLED)
    expect(title).to_be_in_viewport()
    expect(new_chat).to_be_in_viewport()
    expect(chat.get_by_role("button", name="Files", exact=True)).to_be_in_viewport()
    line.click()
    expect(summary.get_by_text("Avg first token")).to_be_visible()
    expect(chat.locator("#thread-usage")).to_be_visible()
    line.click()
    chat.screenshot(path=str(shots / f"thread-header-{size[0]}.png"))


def test_settings_come_in_sections_that_each_fit(chat, shots):
    chat.set_viewport_size({"width": 1280, "height": 800})
    chat.get_by_role("button", name="Session settings").click()
    dialog = chat.get_by_role("dialog", name="Session settings")
    form = dialog.locator("form.settings-form")
    tabs = dialog.get_by_role("tab")
    names = ["Model", "Context", "Roles", "Conversation", "Group rules", "Tools"]
    expect(tabs).to_have_text(names)
    for name in names:
        dialog.get_by_role("tab", name=name).click()
        expect(dialog.get_by_role("tab", name=name)).to_have_attribute("aria-selected", "true")
        overflow = form.evaluate("f => f.scrollHeight - f.clientHeight")
        assert overflow <= 0, f"the {name} section needs {overflow} px of scrolling"
    dialog.get_by_role("tab", name="Model").click()
    chat.screenshot(path=str(shots / "settings-1280.png"))


@pytest.mark.parametrize("size", SIZES)
def test_new_session_offers_tools_and_fits_a_phone(page, alice, roles, size, shots):
    page.set_viewport_size({"width": size[0], "height": size[1]})
    log_in(page)
    page.get_by_role("button", name="New session").click()
    dialog = page.get_by_role("dialog", name="New session")
    dialog.get_by_role("tab", name="Context").click()
    persona = dialog.get_by_label("Saved persona")
    assert persona.bounding_box()["width"] >= 0.6 * dialog.bounding_box()["width"]
    dialog.get_by_role("tab", name="Tools").click()
    expect(dialog.get_by_role("link", name="MCP servers")).to_be_visible()
    dialog.get_by_role("checkbox", name="rename_thread (write)").uncheck()
    page.screenshot(path=str(shots / f"new-session-{size[0]}.png"))
    dialog.get_by_role("button", name="Create session").click()
    expect(page.get_by_role("combobox", name="Message", exact=True)).to_be_visible()
    session = alice.chat_sessions.get()
    assert session.disabled_tools == ["rename_thread"]


@pytest.mark.parametrize("size", SIZES)
def test_the_mcp_servers_page_is_spaced_and_reachable_on_a_phone(
    page, alice, roles, size, mcp_http, settings, shots
):
    settings.PARLEY_MCP_ALLOW_PRIVATE_URLS = True
    page.set_viewport_size({"width": size[0], "height": size[1]})
    log_in(page)
    page.locator(".page-links").get_by_role("link", name="MCP servers").click()
    page.get_by_label("Name (its tools are called name__tool)").fill("remote")
    page.get_by_label("URL").fill(mcp_http.url)
    page.get_by_role("button", name="Add server").click()
    page.get_by_role("button", name="Test remote").click()
    chips = page.get_by_role("list", name="Tools")
    expect(chips.get_by_role("listitem").first).to_be_visible(timeout=scaled(15_000))
    expect(chips).to_contain_text("echo (read-only)")
    test, delete = (
        page.get_by_role("button", name=f"{verb} remote") for verb in ("Test", "Delete")
    )
    assert abs(test.bounding_box()["y"] - delete.bounding_box()["y"]) < 4  # side by side
    fields = [page.get_by_label(label).bounding_box() for label in ("URL", "Headers (one")]
    assert fields[1]["y"] - (fields[0]["y"] + fields[0]["height"]) >= 8  # room between inputs
    page.screenshot(path=str(shots / f"mcp-servers-{size[0]}.png"))


def test_a_tab_on_screen_counts_as_reading_its_thread(chat, fast_demo):
    thread = Thread.objects.get(pk=chat.session.active_thread.pk)
    # Count the pushes that carry this thread's unread badge (the counts after a turn).
    chat.evaluate(
        """id => { window.__badgePushes = 0;
            document.addEventListener("htmx:wsAfterMessage", e => {
                if (String(e.detail.message).includes(id)) window.__badgePushes += 1; }); }""",
        f"unread-{thread.public_id}",
    )
    send(chat, "@all what opens the film?")
    for handle in ("visual_architect", "director"):
        wait_done(bubble(chat, handle))
    badge = chat.locator(f"#unread-{thread.public_id}")
    chat.wait_for_function("window.__badgePushes > 0")  # the counts after the turn came
    expect(badge).to_be_hidden()

    def seen() -> bool:
        from apps.chat.reading import seen_seq

        current = Thread.objects.get(pk=thread.pk)
        return seen_seq(thread=current, user=current.session.owner) == current.next_seq - 1

    from tests.conftest import wait_until

    wait_until(seen, timeout=5)


@pytest.mark.parametrize("size", SIZES)
def test_the_api_tokens_page_fits_a_phone_and_names_each_scope(page, alice, roles, size, shots):
    """A fresh token (its value and curl line shown once) and the list, within the screen."""
    page.set_viewport_size({"width": size[0], "height": size[1]})
    log_in(page)
    page.goto("/account/tokens/")
    page.get_by_label("Name").fill("laptop terminal")
    page.get_by_label("Scope").select_option("post")
    page.get_by_role("button", name="Make a token").click()
    expect(page.locator("#new-token")).to_contain_text("pat_")
    row = page.locator(".credential-row").filter(has_text="laptop terminal")
    expect(row).to_contain_text("read and post")
    width = page.evaluate("document.scrollingElement.scrollWidth")
    wide = page.evaluate(
        """Array.from(document.querySelectorAll("body *"))
            .filter(e => e.getBoundingClientRect().right > innerWidth + 1)
            .map(e => e.tagName + "." + e.className).slice(0, 12)"""
    )
    assert width <= size[0], f"the page is {width} px wide on a {size[0]} px screen: {wide}"
    page.screenshot(path=str(shots / f"api-tokens-{size[0]}.png"), full_page=True)


@pytest.mark.parametrize("size", SIZES)
def test_an_openrouter_credential_is_added_on_a_phone_too(page, alice, roles, size, shots):
    """The form with a preset's own fields fits the screen, and saves them with its default
    address (which fields show for which provider: test_session_setup.py)."""
    page.set_viewport_size({"width": size[0], "height": size[1]})
    log_in(page)
    page.goto("/credentials/new/")
    page.get_by_label("Provider").select_option("openrouter")
    page.get_by_label("Name", exact=True).fill("Router")
    page.get_by_label("API key or token").fill("sk-or-test-0000000000000000")
    page.get_by_label("Your app's URL").fill("https://parley.example")
    width = page.evaluate("document.scrollingElement.scrollWidth")
    assert width <= size[0], f"the form is {width} px wide on a {size[0]} px screen"
    page.screenshot(path=str(shots / f"credential-form-{size[0]}.png"), full_page=True)
    page.get_by_role("button", name="Save").click()
    expect(page).to_have_url(re.compile(r"/credentials/$"))
    credential = alice.credentials.get(name="Router")
    assert (credential.base_url, credential.options) == (
        "https://openrouter.ai/api/v1",
        {"http_referer": "https://parley.example"},
    )
