"""Attaching in the composer, in Chromium (issue 35, items 1 and 4): the Attach button,
pasting and dropping, chips with a thumbnail or an icon and a remove button, a refused file
said in a sentence with the message box untouched, the thumbnails and a PDF's first page in the
sent bubble, and the lightbox with the description a text-only model reads."""

from __future__ import annotations

import base64
import re

import pytest
from playwright.sync_api import expect

from apps.chat.models import Attachment, Message
from tests.attachments.test_sniff import image_bytes, text_pdf
from tests.browser.test_group_chat import bubble, wait_done

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# Hands `files` ({name, type, base64}) to the page as the event a person's paste or drop
# fires (Chromium builds the DataTransfer; Playwright cannot paste files itself).
FIRE = """([kind, files]) => {
    const transfer = new DataTransfer();
    for (const f of files) {
        const bytes = Uint8Array.from(atob(f.data), c => c.charCodeAt(0));
        transfer.items.add(new File([bytes], f.name, {type: f.type}));
    }
    if (kind === "paste") {
        const box = document.getElementById("composer-text");
        box.dispatchEvent(new ClipboardEvent("paste", {clipboardData: transfer, bubbles: true,
                                                        cancelable: true}));
    } else {
        const target = document.getElementById("transcript");
        for (const type of ["dragover", "drop"]) {
            target.dispatchEvent(new DragEvent(type, {dataTransfer: transfer, bubbles: true,
                                                      cancelable: true}));
        }
    }
}"""


def as_file(name: str, media_type: str, data: bytes) -> dict:
    return {"name": name, "type": media_type, "data": base64.b64encode(data).decode()}


def chips(page):
    return page.locator("#attachment-chips .attachment-chip:not(.attachment-chip--uploading)")


@pytest.mark.parametrize("size", [(1280, 800), (390, 844)], ids=["desktop", "phone"])
def test_attach_paste_and_drop_make_chips_and_the_sent_bubble_shows_them(
    chat, fast_demo, shots, size
):
    chat.set_viewport_size({"width": size[0], "height": size[1]})
    width = size[0]
    box = chat.get_by_role("combobox", name="Message", exact=True)
    box.fill("@assistant what is in these?")
    # A PDF dropped on the thread.
    chat.evaluate(FIRE, ["drop", [as_file("report.pdf", "application/pdf", text_pdf("Hi"))]])
    expect(chips(chat)).to_have_count(1)
    expect(chips(chat).first).to_contain_text("report.pdf")
    expect(chips(chat).first.locator(".attachment-icon")).to_have_text("PDF")
    png = image_bytes("PNG", size=(60, 40))
    chat.evaluate(FIRE, ["paste", [as_file("image.png", "image/png", png)]])
    expect(chips(chat)).to_have_count(2)
    expect(chips(chat).nth(1).locator("img.attachment-thumb")).to_be_visible()
    # A browser names every pasted picture image.png: it gets the time it was pasted instead.
    expect(chips(chat).nth(1)).to_contain_text(
        re.compile(r"pasted \d{4}-\d\d-\d\d \d\d\.\d\d\.\d\d\.png")
    )
    chat.locator("#attach-input").set_input_files(  # the Attach button's picker
        files=[{"name": "notes.md", "mimeType": "text/markdown", "buffer": b"# Notes\n"}]
    )
    expect(chips(chat)).to_have_count(3)
    # An image waits: the roles whose model reads text only (the demo's) say so.
    expect(chat.locator(".attachment-sight")).to_be_visible()
    expect(chat.locator(".attachment-sight")).to_contain_text("@assistant")
    expect(chat.locator("#role-picker .chip--describing").first).to_have_attribute(
        "title", re.compile("reads a description of each image"))  # fmt: skip
    chat.locator("#composer").screenshot(path=shots / f"attachments-composer-{width}.png")
    if width < 500:  # on a phone the chips are one row that scrolls sideways
        assert chat.locator("#attachment-chips").bounding_box()["height"] < 60
    # Taken out again: the chip goes, and so does the waiting row.
    chips(chat).nth(2).get_by_role("button", name="Remove notes.md").click()
    expect(chips(chat)).to_have_count(2)
    assert box.input_value() == "@assistant what is in these?"  # the words were never touched
    box.press("Enter")
    expect(box).to_have_value("")
    expect(chat.locator("#attachment-chips")).to_be_hidden()
    person = bubble(chat, "user").last
    expect(person.locator(".msg-attachment-image img")).to_have_count(1)
    page_one = person.locator(".msg-attachment-page")
    expect(page_one).to_contain_text("report.pdf · 1 page")  # its first page, drawn
    caption = page_one.locator(".caption-text")  # a long name ends in an ellipsis, not a cut
    assert caption.evaluate("e => getComputedStyle(e).textOverflow") == "ellipsis"
    expect(person.locator(".msg-attachments-note")).to_contain_text("@assistant")
    wait_done(bubble(chat, "assistant").last)
    chat.screenshot(path=shots / f"attachments-sent-{width}.png")
    assert page_one.locator("img").evaluate("img => img.naturalWidth") > 100
    # The lightbox: the PDF's first page, then (→) the image with the description the demo
    # (a text-only model) read; Esc closes it and the focus goes back.
    page_one.click()
    lightbox = chat.locator("#lightbox")
    expect(lightbox).to_be_visible()
    expect(lightbox.locator("#lightbox-title")).to_have_text("report.pdf")
    expect(lightbox.locator("#lightbox-position")).to_have_text("1 of 2")
    chat.keyboard.press("ArrowRight")
    expect(lightbox.locator("#lightbox-title")).to_have_text(re.compile(r"^pasted .*\.png$"))
    # Its bar never squeezes: the whole title, "2 of 2" and "Open full size" each on one line.
    title = lightbox.locator("#lightbox-title")
    assert title.evaluate("e => e.scrollWidth <= e.clientWidth"), "the title is cut"
    for part in ("#lightbox-position", "#lightbox-open"):
        assert lightbox.locator(part).bounding_box()["height"] < 30, f"{part} wraps"
    expect(lightbox.locator("#lightbox-facts")).to_contain_text("60 \u00d7 40 px")
    chat.screenshot(path=shots / f"attachments-lightbox-{width}.png")
    chat.keyboard.press("Escape")
    expect(lightbox).to_be_hidden()
    expect(page_one).to_be_focused()
    # The description was written for the demo's reply: the bubble was pushed again with it,
    # so the lightbox shows it without a reload.
    bubble(chat, "user").last.locator(".msg-attachment-image").click()
    expect(lightbox.locator("#lightbox-description")).to_be_visible()
    lightbox.locator("#lightbox-description summary").click()
    expect(lightbox.locator("#lightbox-description-text")).to_contain_text("60 by 40 pixels")
    expect(lightbox.locator("#lightbox-described-by")).to_contain_text("from the pixels")
    sent = Message.objects.get(thread=chat.session.active_thread, speaker="user")
    names = [a.name for a in sent.attachments.order_by("position")]
    assert names[0] == "report.pdf" and re.fullmatch(r"pasted [\d-]+ [\d.]+\.png", names[1])
    assert not Attachment.objects.filter(name="notes.md").exists()
    # The thumbnail is the stored image, served to the page that shows it.
    natural = person.locator(".msg-attachment-image img").evaluate("img => img.naturalWidth")
    assert natural == 60


def test_a_refused_file_is_said_and_an_image_alone_can_be_sent(chat, fast_demo):
    box = chat.get_by_role("combobox", name="Message", exact=True)
    box.fill("keep these words")
    chat.evaluate(FIRE, ["drop", [as_file("logo.svg", "image/svg+xml", b"<svg onload='x()'/>")]])
    refused = chat.locator("#attachment-refusals .attachment-refused")
    expect(refused).to_contain_text("export it as PNG")
    assert box.input_value() == "keep these words"
    # Under the message box, and its button dismisses it.
    assert refused.bounding_box()["y"] > box.bounding_box()["y"]
    refused.get_by_role("button", name="Dismiss").click()
    expect(refused).to_have_count(0)
    expect(chat.locator("#attachment-refusals")).to_be_hidden()
    box.fill("")
    chat.evaluate(FIRE, ["paste", [as_file("shot.png", "image/png", image_bytes("PNG"))]])
    expect(chips(chat)).to_have_count(1)
    chat.get_by_role("button", name="Send").click()  # no words: the image is the message
    expect(bubble(chat, "user").last.locator(".msg-attachment-image img")).to_have_count(1)


def test_on_a_phone_a_file_of_the_session_is_attached_and_a_sent_one_saved_back(
    chat, fast_demo, shots
):
    """390x844: the Files dialog's Attach puts a workspace file in the composer; the sent
    picture opens in the lightbox, whose Save to files copies it back into the workspace."""
    from apps.chat.records.sessions import session_workspace

    chat.set_viewport_size({"width": 390, "height": 844})
    workspace = session_workspace(chat.session)
    workspace.write("boards/frame.png", image_bytes("PNG", size=(120, 80)))
    chat.get_by_role("button", name="Files", exact=True).click()
    files = chat.get_by_role("dialog", name="Files")
    files.get_by_role("button", name="Attach boards/frame.png to your message").click()
    expect(files).to_be_hidden()  # closed: the chip is in the composer
    expect(chips(chat)).to_have_count(1)
    expect(chips(chat).first).to_contain_text("frame.png")
    chat.locator("#composer").screenshot(path=shots / "attachments-from-files-390.png")
    box = chat.get_by_role("combobox", name="Message", exact=True)
    box.fill("@assistant the frame?")
    box.press("Enter")
    person = bubble(chat, "user").last
    expect(person.locator(".msg-attachment-image img")).to_have_count(1)
    wait_done(bubble(chat, "assistant").last)
    person.locator(".msg-attachment-image").click()
    lightbox = chat.locator("#lightbox")
    expect(lightbox.locator("#lightbox-title")).to_have_text("frame.png")
    expect(lightbox.locator("[data-lightbox-step]").first).to_be_hidden()  # one picture
    assert lightbox.bounding_box()["width"] <= 390
    lightbox.get_by_role("button", name="Save to files").click()
    expect(lightbox.locator("#lightbox-saved")).to_have_text(
        "Saved in the session's files as attachments/frame.png: everyone in the room and "
        "every role can read it there."
    )
    chat.screenshot(path=shots / "attachments-saved-390.png")
    assert "attachments/frame.png" in {info.path for info in workspace.files()}


def test_saving_a_whispered_picture_asks_before_everyone_can_read_it(chat, bob, fast_demo, shots):
    """A picture sent in a whisper: the lightbox's Save to files says who sees it now and who
    would, and saves it only after Save for everyone."""
    from apps.chat.council.posting import message_post
    from apps.chat.records.attachments import attachment_add
    from apps.chat.records.rooms import member_add
    from apps.chat.records.sessions import session_workspace

    session, thread = chat.session, chat.session.active_thread
    member_add(session=session, by=session.owner, username="bob")
    picture = image_bytes("PNG", size=(90, 60))
    photo = attachment_add(session=session, owner=session.owner, thread=thread,
                           name="secret-board.png", data=picture)  # fmt: skip
    posted = message_post(thread=thread, author=session.owner,
                          text="/whisper @assistant only you", attachments=[photo])  # fmt: skip
    assert posted.user_message is not None
    chat.reload()
    person = bubble(chat, "user").last
    person.locator(".msg-attachment-image").click()
    lightbox = chat.locator("#lightbox")
    lightbox.get_by_role("button", name="Save to files").click()
    said = lightbox.locator("#lightbox-saved")
    expect(said).to_contain_text("This file was whispered: only")
    expect(said).to_contain_text("everyone in the room (2 people) and to every role")
    assert not session_workspace(session).files()
    chat.screenshot(path=shots / "attachments-whisper-save-1280.png")
    lightbox.get_by_role("button", name="Save for everyone").click()
    expect(said).to_contain_text("Saved in the session's files as attachments/secret-board.png")
    assert [f.path for f in session_workspace(session).files()] == ["attachments/secret-board.png"]
