"""axe-core (the accessibility engine, from npm) on every page and dialog, light and dark,
desktop and phone: no serious or critical violation, colour contrast included."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.conf import settings
from playwright.sync_api import expect

from apps.chat.council.posting import message_post
from apps.chat.models import Message, MessageStatus
from apps.chat.records.rooms import member_add
from apps.chat.records.sessions import session_create
from apps.chat.records.sharing import share_create
from apps.imports.models import ImportJob, ImportStatus
from apps.library.models import Chunk
from apps.library.services import document_create, document_index
from apps.roles.cards import read_card
from apps.roles.services import role_from_card
from tests.browser.test_live_chat import log_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
AXE = Path(settings.BASE_DIR) / "tests" / "node" / "node_modules" / "axe-core" / "axe.min.js"
SIZES = {"desktop": (1280, 800), "phone": (390, 844)}
RUN_AXE = """async () => {
  const result = await axe.run(document, {resultTypes: ["violations"]});
  return result.violations
    .filter(v => v.impact === "serious" || v.impact === "critical")
    .map(v => v.id + " (" + v.impact + "): " + v.help + " — " +
         v.nodes.slice(0, 3).map(n => n.target.join(" ") + " " +
           (n.any[0] ? n.any[0].message : "")).join(" | "));
}"""


def violations(page, where: str) -> list[str]:
    return [f"{where}: {found}" for found in page.evaluate(RUN_AXE)]


@pytest.fixture
def world(alice, bob, roles):
    session = session_create(owner=alice, name="Harbour film")
    thread = session.active_thread
    member_add(session=session, by=alice, username="bob")
    posted = message_post(thread=thread, author=alice, text="@director open on the harbour")
    guide = b"# Guide\n\nThe harbour bell rings at dawn, three times."
    document = document_create(session=session, by=alice, name="guide.md", data=guide)
    document_index(document=document, data=guide)
    mark = f"[L{Chunk.objects.get(document=document).pk}]"
    said = f"Dawn, **fog**, “the harbour bell rings at dawn” {mark}.\n\n```python\nprint(1)\n```"
    Message.objects.filter(pk=posted.replies[0].pk).update(
        status=MessageStatus.DONE, content=[{"type": "text", "text": said}]
    )
    whisper = message_post(thread=thread, author=alice, text="/whisper @director @bob quietly")
    for reply in whisper.replies:
        Message.objects.filter(pk=reply.pk).update(
            status=MessageStatus.DONE, content=[{"type": "text", "text": "Noted."}]
        )
    card = json.dumps({"name": "Seraphina", "character_book": {"entries": [
        {"keys": ["glade"], "content": "The glade is warded."}]}})  # fmt: skip
    role = role_from_card(owner=alice, card=read_card(card.encode(), "s.json"))
    _link, token = share_create(thread=thread, by=alice, up_to=None, expires_in_days=7)
    job = ImportJob.objects.create(
        owner=alice, name="conversations.json", status=ImportStatus.FAILED,
        error="The file is not valid JSON (parse error).",
    )  # fmt: skip
    return {"thread": thread, "session": session, "role": role, "token": token, "job": job}


@pytest.mark.heavy
@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("size", SIZES)
def test_no_page_or_dialog_has_a_serious_accessibility_violation(
    page, world, scheme, size, settings
):
    page.set_viewport_size(dict(zip(("width", "height"), SIZES[size], strict=True)))
    page.emulate_media(color_scheme=scheme)
    page.context.add_init_script(path=str(AXE))  # on every page (its CSP forbids inline scripts)
    found: list[str] = []
    thread, session = world["thread"], world["session"]

    page.goto("/login/")
    found += violations(page, "log in")
    # With a team's provider: its button beside the password form, and a refused sign-in's
    # sentence (the page only names the provider; nothing is asked of it).
    settings.PARLEY_OIDC_ISSUER, settings.PARLEY_OIDC_NAME = "https://id.example.test", "Acme"
    page.goto("/login/?refused=expired")
    expect(page.get_by_role("link", name="Sign in with Acme")).to_be_visible()
    found += violations(page, "log in through a provider, after a refused sign-in")
    settings.PARLEY_OIDC_ISSUER = ""
    page.goto(f"/shared/{world['token']}/")
    expect(page.get_by_role("heading", level=1)).to_be_visible()
    found += violations(page, "a shared thread")

    log_in(page)
    for url, where in [
        ("/", "sessions"),
        ("/credentials/", "credentials"),
        ("/credentials/new/", "a new credential"),
        ("/mcp/", "MCP servers"),
        ("/roles/", "roles"),
        (f"/roles/{world['role'].handle}/lorebook/", "a lorebook"),
        ("/account/import/", "import"),
        (f"/account/import/{world['job'].public_id}/", "an import that failed"),
        ("/account/shared/", "shared links"),
        ("/search/?q=harbour", "search everywhere"),
        (f"/s/{session.public_id}/search/?q=harbour", "search a session"),
    ]:
        page.goto(url)
        found += violations(page, where)
        if url == "/":
            page.get_by_role("button", name="New session").click()
            expect(page.locator("#create-dialog")).to_be_visible()
            found += violations(page, "a new session")
            page.keyboard.press("Escape")

    page.goto(f"/t/{thread.public_id}/")
    expect(page.locator("#transcript article").first).to_be_visible()
    found += violations(page, "a thread")
    # A refused attachment says why under the composer.
    page.locator("#attach-input").set_input_files(
        files=[{"name": "tool.exe", "mimeType": "application/octet-stream", "buffer": b"MZ\0"}]
    )
    expect(page.locator(".attachment-refused")).to_be_visible()
    found += violations(page, "a refused attachment")
    for opener, dialog, where in [
        ("#settings-open", "#settings-dialog", "session settings"),
        ("#room-open", "#room-dialog", "people"),
        ("#files-open", "#files-dialog", "files"),
    ]:
        page.locator(opener).click()
        expect(page.locator(f"{dialog} form, {dialog} h2").first).to_be_visible()
        found += violations(page, where)
        page.keyboard.press("Escape")
    # A citation opens its passage in place, the quoted words marked.
    page.locator("#transcript a", has_text="[1]").first.click()
    expect(page.locator("#passage-dialog mark")).to_have_text("The harbour bell rings at dawn")
    found += violations(page, "a cited passage")
    page.keyboard.press("Escape")
    page.locator(".share-menu summary").click()
    page.get_by_role("button", name="Share a read-only link…").click()
    expect(page.get_by_role("dialog", name="Share a read-only link")).to_be_visible()
    found += violations(page, "sharing")
    page.keyboard.press("Escape")
    page.locator("body").press("?")
    expect(page.locator("#shortcuts-dialog")).to_be_visible()
    found += violations(page, "shortcuts")
    assert not found, "\n".join(found)
