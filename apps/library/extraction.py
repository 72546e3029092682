"""A library document's text, in sections that say where they came from: the page (PDF), the
heading path ("Install > On Debian"), and the character range in the document's own text.
No database here; a PDF is read in a bounded child (apps.attachments.bounded).

Kinds: PDF, Markdown, plain text, HTML, CSV/TSV and source files. A file of another kind, or
a PDF without a text layer (a scan), is refused in a sentence, never stored as an empty
document.
"""

from __future__ import annotations

import csv
import io
import re
import zipfile
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import PurePosixPath

from apps.attachments.text import storable

MAX_DOCUMENT_CHARS = 20_000_000  # about 6,000 pages of prose
CSV_ROWS_PER_SECTION = 40
MAX_CSV_ROWS = 200_000
TEXT_SUFFIXES = {".txt", ".text", ".log", ".rst", ".srt", ".tex"}
MARKDOWN_SUFFIXES = {".md", ".markdown", ".mdx"}
HTML_SUFFIXES = {".html", ".htm", ".xhtml"}
TABLE_SUFFIXES = {".csv": ",", ".tsv": "\t"}
CODE_SUFFIXES = {
    ".py", ".js", ".ts", ".tsx", ".jsx", ".java", ".kt", ".go", ".rs", ".rb", ".php", ".c", ".h",
    ".cpp", ".hpp", ".cs", ".swift", ".sh", ".sql", ".r", ".toml", ".yaml", ".yml", ".json",
    ".ini", ".cfg", ".xml", ".css",
}  # fmt: skip
# What the library reads, by a file's name (a folder's other files are left out, said).
DOCUMENT_SUFFIXES = frozenset(
    {".pdf", ".docx", *TEXT_SUFFIXES, *MARKDOWN_SUFFIXES, *HTML_SUFFIXES, *TABLE_SUFFIXES,
     *CODE_SUFFIXES}
)  # fmt: skip
# A Word document is a zip: measured before it is opened.
MAX_DOCX_MEMBERS = 2_000
MAX_DOCX_UNPACKED = 200 * 1024 * 1024
MAX_RATIO = 200  # a member unpacking to more than this many times its size is a bomb
MARKDOWN_HEADING = re.compile(r"^(#{1,6})[ \t]+(.+?)[ \t#]*$", re.M)


class Unreadable(ValueError):
    """The file cannot be a library document; the message says why, in a sentence."""


@dataclass(frozen=True)
class Section:
    text: str
    page: int | None = None  # 1-based, for a PDF
    heading: str = ""  # the path of headings above it: "Install > On Debian"
    start: int = 0  # where it starts in the document's text (all its sections joined)


def extract(name: str, data: bytes) -> list[Section]:
    """The document's sections, in order; Unreadable when it cannot be read as one."""
    suffix = PurePosixPath(name.lower()).suffix
    if data[:5] == b"%PDF-" or suffix == ".pdf":
        sections = _pdf(name, data)
    elif suffix == ".docx":
        sections = _docx(name, data)
    elif suffix in HTML_SUFFIXES:
        sections = _html(_decoded(name, data))
    elif suffix in TABLE_SUFFIXES:
        sections = _table(_decoded(name, data), TABLE_SUFFIXES[suffix])
    elif suffix in MARKDOWN_SUFFIXES:
        sections = _markdown(_decoded(name, data))
    elif suffix in TEXT_SUFFIXES or suffix in CODE_SUFFIXES or not suffix:
        text = _decoded(name, data)
        sections = [Section(text)] if suffix in CODE_SUFFIXES else _paragraphs(text)
    else:
        raise Unreadable(
            f"“{name}”: the library reads PDFs, Word (.docx), Markdown, text, HTML, CSV and "
            "source files."
        )
    placed, offset = [], 0
    for section in sections:
        text = section.text.strip()
        if text:
            placed.append(Section(text, section.page, section.heading, offset))
            offset += len(text) + 2  # the sections are joined by a blank line
    if not placed:
        raise Unreadable(f"“{name}” holds no text.")
    return placed


def _decoded(name: str, data: bytes) -> str:
    if b"\x00" in data[:4096]:
        raise Unreadable(f"“{name}” is not text (it holds binary data).")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        text = data.decode("latin-1")
    return storable(text)[:MAX_DOCUMENT_CHARS]


def _pdf(name: str, data: bytes) -> list[Section]:
    from apps.attachments import bounded

    try:
        pages = bounded.pdf_pages(data, max_chars=MAX_DOCUMENT_CHARS)
    except bounded.TooCostly as exc:
        raise Unreadable(f"“{name}”: its text could not be read ({exc}).") from None
    if pages is None:
        raise Unreadable(f"“{name}” is not a PDF that can be opened (damaged or encrypted).")
    if not any(text.strip() for text in pages):
        raise Unreadable(
            f"“{name}” has no text layer (a scan?): the library cannot search a picture of "
            "text. Run it through OCR first."
        )
    return [Section(storable(text), page=number) for number, text in enumerate(pages, 1)]


def _docx(name: str, data: bytes) -> list[Section]:
    """A Word document's paragraphs under their heading path, and its tables row by row, in
    the order they stand; its zip is measured before anything is unpacked."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
        members = archive.infolist()
    except (zipfile.BadZipFile, ValueError):
        raise Unreadable(f"“{name}” is not a Word document that can be opened.") from None
    unpacked = sum(member.file_size for member in members)
    squeezed = max((m.file_size / max(m.compress_size, 1) for m in members), default=0)
    if len(members) > MAX_DOCX_MEMBERS or unpacked > MAX_DOCX_UNPACKED or squeezed > MAX_RATIO:
        raise Unreadable(
            f"“{name}” unpacks to far more than it holds (a zip bomb?): the library leaves it."
        )
    import docx
    from docx.table import Table
    from docx.text.paragraph import Paragraph

    try:
        document = docx.Document(io.BytesIO(data))
    except Exception as exc:  # a damaged file makes python-docx raise many kinds
        raise Unreadable(f"“{name}” is not a Word document that can be opened ({exc}).") from None
    sections: list[Section] = []
    path: list[tuple[int, str]] = []
    for element in document.element.body.iterchildren():
        tag = element.tag.rsplit("}", 1)[-1]
        if tag == "p":
            paragraph = Paragraph(element, document)
            text = paragraph.text.strip()
            style = paragraph.style.name if paragraph.style is not None else ""
            level = re.fullmatch(r"Heading (\d)", style or "")
            if level and text:
                path = [(lvl, t) for lvl, t in path if lvl < int(level[1])] + [
                    (int(level[1]), text)
                ]
            elif text:
                sections.append(Section(storable(text), heading=_path(path)))
        elif tag == "tbl":
            rows = [
                " | ".join(cell.text.strip() for cell in row.cells)
                for row in Table(element, document).rows
            ]
            if rows:
                sections.append(Section(storable("\n".join(rows)), heading=_path(path)))
    return sections


def _paragraphs(text: str) -> list[Section]:
    return [Section(part) for part in re.split(r"\n\s*\n", text)]


def _markdown(text: str) -> list[Section]:
    """Each heading's text under its path of headings ("Guide > Install > On Debian")."""
    sections: list[Section] = []
    path: list[tuple[int, str]] = []
    position = 0
    for match in MARKDOWN_HEADING.finditer(text):
        before = text[position : match.start()]
        sections += [Section(p.text, heading=_path(path)) for p in _paragraphs(before)]
        level, title = len(match.group(1)), match.group(2).strip()
        path = [(lvl, name) for lvl, name in path if lvl < level] + [(level, title)]
        position = match.end()
    sections += [Section(p.text, heading=_path(path)) for p in _paragraphs(text[position:])]
    return sections


def _path(path: list[tuple[int, str]]) -> str:
    return " > ".join(title for _, title in path)


def _table(text: str, delimiter: str) -> list[Section]:
    """Rows in groups, each group led by the header row (a hit reads with its columns)."""
    rows = csv.reader(io.StringIO(text), delimiter=delimiter)
    try:
        header = next(rows)
    except (StopIteration, csv.Error):
        return []
    sections, group = [], []
    try:
        for number, row in enumerate(rows, start=2):
            if number > MAX_CSV_ROWS:
                break
            group.append(delimiter.join(row))
            if len(group) == CSV_ROWS_PER_SECTION:
                rows_said = f"rows {number - len(group) + 1}-{number}"
                sections.append(
                    Section("\n".join([delimiter.join(header), *group]), heading=rows_said)
                )
                group = []
    except csv.Error:
        pass  # a broken row ends the table: what came before is kept
    if group:
        first = len(sections) * CSV_ROWS_PER_SECTION + 2
        sections.append(Section("\n".join([delimiter.join(header), *group]),
                                heading=f"rows {first}-{first + len(group) - 1}"))  # fmt: skip
    return sections


class _HtmlText(HTMLParser):
    """Visible text by block, under the path of h1-h6 above it; scripts and styles dropped."""

    BLOCKS = {"p", "div", "li", "pre", "blockquote", "tr", "section", "article", "br", "table"}
    HIDDEN = {"script", "style", "template", "noscript", "head"}

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.sections: list[Section] = []
        self.path: list[tuple[int, str]] = []
        self.buffer: list[str] = []
        self.heading: list[str] | None = None
        self.hidden = 0
        self.level = 0

    def handle_starttag(self, tag: str, attrs) -> None:
        if tag in self.HIDDEN:
            self.hidden += 1
        elif re.fullmatch(r"h[1-6]", tag):
            self._flush()
            self.heading, self.level = [], int(tag[1])
        elif tag in self.BLOCKS:
            self._flush()

    def handle_endtag(self, tag: str) -> None:
        if tag in self.HIDDEN:
            self.hidden = max(0, self.hidden - 1)
        elif re.fullmatch(r"h[1-6]", tag) and self.heading is not None:
            title = " ".join("".join(self.heading).split())
            self.path = [(lvl, t) for lvl, t in self.path if lvl < self.level] + [
                (self.level, title)
            ]
            self.heading = None
        elif tag in self.BLOCKS:
            self._flush()

    def handle_data(self, data: str) -> None:
        if self.hidden:
            return
        (self.heading if self.heading is not None else self.buffer).append(data)

    def _flush(self) -> None:
        text = " ".join("".join(self.buffer).split())
        if text:
            self.sections.append(Section(text, heading=_path(self.path)))
        self.buffer = []


def _html(text: str) -> list[Section]:
    parser = _HtmlText()
    parser.feed(text)
    parser.close()
    parser._flush()
    return parser.sections
