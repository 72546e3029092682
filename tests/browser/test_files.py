"""The Files dialog at 1280x800 and 390x844: real buttons, a drop zone, folders that keep their
layout (chosen, typed or dropped on the dialog), and a list with sizes and dates; files
dropped on the message box are attachments instead."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from apps.chat.records.sessions import session_workspace

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

DROP_ON_COMPOSER = """([name, text]) => {
  const transfer = new DataTransfer();
  transfer.items.add(new File([text], name, { type: "text/plain" }));
  const area = document.getElementById("composer-text");
  const options = { dataTransfer: transfer, bubbles: true, cancelable: true };
  for (const type of ["dragover", "drop"]) area.dispatchEvent(new DragEvent(type, options));
}"""


@pytest.mark.parametrize("size", [(1280, 800), (390, 844)])
def test_files_dialog_uploads_files_and_folders_and_lists_them(chat, size, tmp_path, shots):
    chat.set_viewport_size({"width": size[0], "height": size[1]})
    chat.get_by_role("button", name="Files", exact=True).click()
    files = chat.get_by_role("dialog", name="Files")
    expect(files).to_contain_text("No files yet.")
    expect(files.get_by_text("Choose files…")).to_be_visible()

    # A folder chosen whole keeps its layout.
    folder = tmp_path / "act-1"
    (folder / "scenes").mkdir(parents=True)
    (folder / "scenes" / "dawn.md").write_text("# Dawn\nThe bell rings.")
    (folder / "cast.txt").write_text("Ana, Rui")
    files.get_by_label("Choose a folder…").set_input_files(folder)
    table = files.get_by_role("table", name="Files in the workspace")
    expect(table).to_contain_text("act-1/scenes/dawn.md")
    expect(table).to_contain_text("cast.txt")

    # "Into folder" puts chosen files in a folder; a path that leaves the workspace is refused.
    files.get_by_label("Into folder").fill("notes")
    files.get_by_label("Choose files…").set_input_files(
        files=[{"name": "idea.md", "mimeType": "text/markdown", "buffer": b"Fog at six."}]
    )
    expect(table).to_contain_text("idea.md")
    files.get_by_label("Into folder").fill("../outside")
    files.get_by_label("Choose files…").set_input_files(
        files=[{"name": "x.md", "mimeType": "text/markdown", "buffer": b"x"}]
    )
    expect(files.get_by_role("alert")).to_contain_text("not a valid path")
    workspace = session_workspace(chat.session)
    assert {f.path for f in workspace.files()} == {
        "act-1/scenes/dawn.md", "act-1/cast.txt", "notes/idea.md",
    }  # fmt: skip
    row = table.get_by_role("row").filter(has_text="idea.md")
    expect(row).to_contain_text("11 bytes")
    expect(row.locator("time")).to_have_count(1)
    expect(row.get_by_role("button", name="Delete notes/idea.md")).to_be_visible()
    expect(row.get_by_role("link", name="Download notes/idea.md")).to_be_visible()
    # Nothing is flush against the dialog's edge, and nothing sticks out of it.
    box, zone = files.bounding_box(), files.locator(".files-upload [data-dropzone]").bounding_box()
    assert zone["x"] - box["x"] >= 12 and zone["x"] + zone["width"] <= box["x"] + box["width"] - 12
    chat.screenshot(path=str(shots / f"files-{size[0]}.png"))

    # Files dropped on the message box go with the message (attachments), not the workspace.
    files.get_by_role("button", name="Close files").click()
    chat.evaluate(DROP_ON_COMPOSER, ["dropped.txt", "From the desktop."])
    expect(chat.locator("#attachment-chips .attachment-chip")).to_contain_text("dropped.txt")
    expect(files).to_be_hidden()
