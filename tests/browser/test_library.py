"""The library's journey in a real Chromium: a folder of documents dropped into a session's
library is read by the worker; a council asked with @all answers with citations that open the
passage in place (the PDF's page drawn, the quoted words marked), each quotation marked
checked or "not found in the cited passage"."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from apps.chat.records.sessions import session_set_provider
from apps.library.models import Chunk, Document
from apps.providers.emulator import Script
from tests.attachments.test_sniff import text_pdf
from tests.conftest import wait_until

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

DROP_FOLDER = """([names, texts]) => {
  const transfer = new DataTransfer();
  names.forEach((name, i) => transfer.items.add(new File([texts[i]], name, {type: "text/plain"})));
  const zone = document.querySelector("#library-panel [data-dropzone]");
  const options = {dataTransfer: transfer, bubbles: true, cancelable: true};
  for (const type of ["dragover", "drop"]) zone.dispatchEvent(new DragEvent(type, options));
}"""


def test_a_folder_into_the_library_and_replies_whose_citations_open_checked(
    chat, emulator, emulated_anthropic, tmp_path, shots
):
    session = chat.session
    session_set_provider(session=session, credential=emulated_anthropic, model="claude-sonnet-5")
    folder = tmp_path / "harbour"
    folder.mkdir()
    (folder / "brief.pdf").write_bytes(
        text_pdf("Harbour rules.", "The harbour bell rings at dawn.")
    )
    (folder / "tides.md").write_text("# Tides\n\nSpring tides reach four metres.")
    (folder / "chart.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    chat.reload()
    chat.get_by_role("button", name="Files", exact=True).click()
    library = chat.locator("#library-panel")
    library.get_by_label("Add a folder…").set_input_files(folder)
    expect(library.get_by_role("alert")).to_contain_text("Left out 1 file")
    table = library.get_by_role("table", name="Documents in the library")
    expect(table).to_contain_text("2 pages · 2 passages", timeout=30_000)
    expect(table).to_contain_text("tides.md")
    # The list refreshed as the documents were read; what the upload said stays.
    expect(library.get_by_role("alert")).to_contain_text("Left out 1 file")
    # Dropped on the library (not the workspace), a document goes in as well.
    chat.evaluate(DROP_FOLDER, [["fog.txt"], ["Fog lifts by nine."]])
    expect(table).to_contain_text("fog.txt")
    wait_until(lambda: Document.objects.filter(session=session, state="ready").count() == 3,
               timeout=30)  # fmt: skip
    expect(library.locator("progress")).to_have_count(0, timeout=30_000)  # vectors all done
    expect(table).not_to_contain_text("Waiting to be read", timeout=30_000)  # the list caught up
    expect(library.locator("input[type=file]")).to_have_count(2)  # the refresh added none
    table.scroll_into_view_if_needed()
    chat.screenshot(path=str(shots / "library-1280.png"))
    chat.get_by_role("button", name="Close files").click()

    dawn = Chunk.objects.get(document__name="brief.pdf", page=2)
    said = (f"The brief says “The harbour bell rings at dawn” [L{dawn.pk}], and "
            f"“the bell rings at noon” [L{dawn.pk}].")  # fmt: skip
    emulator.script(*[Script(text=said, provider="anthropic") for _ in range(6)])
    chat.get_by_label("Message").fill("@all when does the bell ring?")
    chat.get_by_role("button", name="Send").click()
    bubble = chat.get_by_role("article", name="Sound Designer")
    expect(bubble).to_contain_text("not found in the cited passage", timeout=30_000)
    link = bubble.get_by_role("link", name="[1]").first
    expect(link).to_have_attribute("title", re.compile(r"brief\.pdf, page 2"))
    expect(bubble).to_contain_text("✓")
    link.click()
    passage = chat.locator("#passage-dialog")
    expect(passage).to_be_visible()
    expect(passage.get_by_role("heading")).to_contain_text("brief.pdf")
    expect(passage.get_by_role("heading")).to_contain_text("page 2")
    expect(passage.locator("mark")).to_have_text("The harbour bell rings at dawn")
    picture = passage.get_by_role("img", name="Page 2 of brief.pdf")
    expect(picture).to_be_visible()
    wait_until(lambda: picture.evaluate("img => img.complete && img.naturalWidth > 0"))
    chat.screenshot(path=str(shots / "library-passage-1280.png"))
