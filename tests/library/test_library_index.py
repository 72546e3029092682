"""The library's first parts: documents read into sections that say where they came from,
cut into chunks at paragraphs and sentences, and found by the database's own full-text engine
(FTS5 on SQLite, tsvector on PostgreSQL), scoped to one session's ready documents."""

from __future__ import annotations

import io

import pytest
from pypdf import PdfWriter

from apps.chat.records.sessions import session_create
from apps.library.chunking import chunks_of
from apps.library.extraction import Section, Unreadable, extract
from apps.library.models import Chunk, Document
from apps.library.search import library_search, query_terms
from apps.library.services import AlreadyThere, document_create, document_index
from tests.attachments.test_sniff import text_pdf

pytestmark = pytest.mark.django_db

GUIDE = """# Harbour guide

The harbour opens at dawn.

## Tides

Spring tides reach four metres. Boats must moor at the north quay when the tide turns.

## Lighthouse

The lighthouse keeper rings the bell at noon.
"""


def test_markdown_sections_keep_their_heading_path_and_place():
    sections = extract("guide.md", GUIDE.encode())
    assert [s.heading for s in sections] == [
        "Harbour guide", "Harbour guide > Tides", "Harbour guide > Lighthouse"]  # fmt: skip
    joined = "\n\n".join(s.text for s in sections)
    for section in sections:  # each range points at its own text in the document's text
        assert joined[section.start : section.start + len(section.text)] == section.text


def test_html_csv_and_code_read_as_text_with_their_places():
    page = b"<html><head><script>evil()</script></head><body><h1>Ships</h1><p>The ferry.</p>"
    page += b"<h2>Fares</h2><p>Three &amp; six.</p></body></html>"
    html = extract("ships.html", page)
    assert [(s.heading, s.text) for s in html] == [("Ships", "The ferry."),
                                                   ("Ships > Fares", "Three & six.")]  # fmt: skip
    rows = "port,depth\n" + "".join(f"quay{n},{n}\n" for n in range(90))
    table = extract("depths.csv", rows.encode())
    assert len(table) == 3 and all(s.text.startswith("port,depth\n") for s in table)
    assert table[0].heading == "rows 2-41"
    code = extract("tide.py", b"def tide():\n    return 4\n")
    assert code[0].text == "def tide():\n    return 4"


def test_a_pdf_keeps_its_pages_and_a_scan_or_a_stranger_file_is_refused():
    pages = extract("brief.pdf", text_pdf("The harbour brief"))
    assert pages[0].page == 1 and "harbour brief" in pages[0].text
    blank = io.BytesIO()
    writer = PdfWriter()
    writer.add_blank_page(width=200, height=200)
    writer.write(blank)
    with pytest.raises(Unreadable, match="no text layer"):
        extract("scan.pdf", blank.getvalue())
    with pytest.raises(Unreadable, match="not a PDF that can be opened"):
        extract("broken.pdf", b"%PDF-1.7 nothing else")
    with pytest.raises(Unreadable, match="reads PDFs, Word"):
        extract("photo.jpg", b"\xff\xd8\xff")
    with pytest.raises(Unreadable, match="not text"):
        extract("notes.txt", b"\x00\x01binary")


def test_chunks_are_cut_at_a_sentence_near_the_size_never_across_a_section():
    sentence = "The tide turns at the north quay every evening. "
    long = Section(sentence * 60, page=3, heading="Tides", start=100)
    chunks = chunks_of([long, Section("Short one.", page=4, start=2000)], words=50)
    assert all(c.text.endswith(".") for c in chunks[:-1])  # cut at a sentence's end
    assert all(len(c.text.split()) <= 50 for c in chunks)
    assert {c.page for c in chunks[:-1]} == {3} and chunks[-1].page == 4
    assert chunks[0].start == 100 and chunks[-1].text == "Short one."
    text = long.text
    for chunk in chunks[:-1]:
        assert text[chunk.start - 100 : chunk.end - 100] == chunk.text


def test_search_finds_the_right_passage_in_this_session_only(alice, bob, roles):
    mine = session_create(owner=alice, name="Harbour", roles=roles)
    theirs = session_create(owner=bob, name="Other", roles=roles)
    guide = document_index(
        document=document_create(session=mine, by=alice, name="guide.md", data=GUIDE.encode()),
        data=GUIDE.encode(),
    )
    assert guide.state == "ready" and guide.chunks_count == 3
    other = "# Tides\n\nThe quay floods at high tide."
    document_index(
        document=document_create(session=theirs, by=bob, name="x.md", data=other.encode()),
        data=other.encode(),
    )
    hits = library_search(session=mine, question="Where must boats moor when the tide turns?")
    assert hits and hits[0].chunk.heading == "Harbour guide > Tides"
    assert all(hit.chunk.document.session_id == mine.pk for hit in hits)
    assert library_search(session=mine, question="helicopter") == []
    # Stemming: "ringing bells" finds "rings the bell".
    assert library_search(session=mine, question="ringing bells")[0].chunk.heading.endswith(
        "Lighthouse"
    )
    # Read again, the chunks are replaced (the index follows: no stale hit).
    document_index(document=guide, data=b"# Moved\n\nNothing about boats.")
    assert Chunk.objects.filter(document=guide).count() == 1
    now = set(Chunk.objects.filter(document=guide).values_list("pk", flat=True))
    assert {hit.chunk.pk for hit in library_search(session=mine, question="moor tide")} <= now


def test_the_same_bytes_twice_and_an_unreadable_file_are_said_in_words(alice, roles):
    session = session_create(owner=alice, name="Harbour", roles=roles)
    document_create(session=session, by=alice, name="guide.md", data=GUIDE.encode())
    with pytest.raises(AlreadyThere, match="already"):
        document_create(session=session, by=alice, name="copy.md", data=GUIDE.encode())
    scan = document_create(session=session, by=alice, name="a.jpg", data=b"\xff\xd8\xff")
    failed = document_index(document=scan, data=b"\xff\xd8\xff")
    assert failed.state == "failed" and "reads PDFs" in failed.error
    assert Document.objects.filter(session=session).count() == 2


def test_hostile_questions_are_words_never_query_syntax(alice, roles):
    session = session_create(owner=alice, name="Harbour", roles=roles)
    document_index(
        document=document_create(session=session, by=alice, name="g.md", data=GUIDE.encode()),
        data=GUIDE.encode(),
    )
    for question in ['tide" OR "x', "NEAR(tide quay)", "tide*", "heading:tides", "') --", "!!!"]:
        library_search(session=session, question=question)  # never an error
    assert query_terms("How do the TIDES turn, and the tides?") == ["tides", "turn"]


def test_a_word_document_keeps_its_headings_and_tables_and_a_zip_bomb_is_left():
    import zipfile

    import docx

    made = docx.Document()
    made.add_heading("Harbour guide", level=1)
    made.add_paragraph("The harbour opens at dawn.")
    made.add_heading("Tides", level=2)
    made.add_paragraph("Boats moor at the north quay.")
    table = made.add_table(rows=2, cols=2)
    for row, values in zip(table.rows, [("quay", "depth"), ("north", "4 m")], strict=True):
        for cell, value in zip(row.cells, values, strict=True):
            cell.text = value
    out = io.BytesIO()
    made.save(out)
    sections = extract("guide.docx", out.getvalue())
    assert [(s.heading, s.text) for s in sections] == [
        ("Harbour guide", "The harbour opens at dawn."),
        ("Harbour guide > Tides", "Boats moor at the north quay."),
        ("Harbour guide > Tides", "quay | depth\nnorth | 4 m"),
    ]
    bomb = io.BytesIO()
    with zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("word/document.xml", b"\0" * (40 * 1024 * 1024))
    with pytest.raises(Unreadable, match="zip bomb"):
        extract("bomb.docx", bomb.getvalue())
    with pytest.raises(Unreadable, match="not a Word document"):
        extract("fake.docx", b"not a zip at all")


def test_a_2000_page_pdf_and_a_huge_csv_are_read_within_their_bounds(alice, roles, settings):
    settings.PARLEY_LIBRARY_VECTORS = "off"  # the words: the vectors are tested on their own
    session = session_create(owner=alice, name="Archive", roles=roles)
    pages = [f"Minutes of sitting {n}: the harbour board met." for n in range(1, 2001)]
    pages[1536] = "Minutes of sitting 1537: the lighthouse lamp was replaced with an amber one."
    data = text_pdf(*pages)
    book = document_index(
        document=document_create(session=session, by=alice, name="minutes.pdf", data=data),
        data=data,
    )
    assert (book.state, book.pages, book.chunks_count) == ("ready", 2000, 2000)
    (hit, *_) = library_search(session=session, question="amber lamp")
    assert hit.chunk.page == 1537
    # A CSV past MAX_CSV_ROWS keeps its first rows (each group with its header) and stops.
    rows = "port,depth\n" + "".join(f"quay{n},{n % 97}\n" for n in range(250_000))
    table = document_index(
        document=document_create(session=session, by=alice, name="depths.csv",
                                 data=rows.encode()),
        data=rows.encode(),
    )  # fmt: skip
    assert table.state == "ready" and table.chunks_count == (200_000 - 1 + 39) // 40
    last = Chunk.objects.filter(document=table).order_by("-seq").first()
    assert last.text.startswith("port,depth\n") and "quay199998," in last.text
    assert not Chunk.objects.filter(document=table, text__contains="quay199999,").exists()


@pytest.mark.django_db(transaction=True)
def test_a_word_in_most_passages_is_left_out_of_the_lookup(alice, roles, settings, monkeypatch):
    from django.db import connection

    from apps.library import search

    settings.PARLEY_LIBRARY_VECTORS = "off"
    monkeypatch.setattr(search, "COMMON_PASSAGES", 3)
    monkeypatch.setattr(search, "_lexeme_shares", (0.0, {}))
    session = session_create(owner=alice, name="Reports", roles=roles)
    for n in range(12):
        text = f"# Report {n}\n\nThe harbour was quiet on day {n}."
        if n == 7:
            text += " The amber lamp was lit."
        document_index(
            document=document_create(session=session, by=alice, name=f"r{n}.md",
                                     data=text.encode()),
            data=text.encode(),
        )  # fmt: skip
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE library_chunk")
        kept = search._not_common_pg(["harbour", "amber"])
    else:
        kept = search._not_common(["harbour", "amber"])
    assert kept == ["amber"]  # in every passage: left out
    hits = library_search(session=session, question="harbour amber")
    assert hits[0].chunk.document.name == "r7.md"
