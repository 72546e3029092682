"""What an uploaded file really is, and the safe copy of it that Parley keeps.

The client's name and content type are never trusted. An image is what Pillow finds when it
may try only PNG, JPEG, WebP and GIF; a PDF starts with `%PDF-` and opens in pypdf; a text
file decodes as UTF-8 and holds no NUL. Images are re-encoded: orientation applied, the first
frame only, at most `MAX_EDGE` pixels on the long edge, no metadata, in a format every provider
reads (PNG, JPEG or WebP) and small enough for each provider's per-image limit. That also drops
whatever was hidden after the image data (an HTML or ZIP polyglot). SVG and every other type
are refused with a sentence a person can act on (TECH_NOTES §11.7, §11.8).
"""

from __future__ import annotations

import io
import warnings
from dataclasses import dataclass
from pathlib import PurePath
from typing import Literal

from PIL import Image, ImageOps, UnidentifiedImageError
from pypdf import PdfReader

Kind = Literal["image", "pdf", "text"]

IMAGE_FORMATS = {"PNG": "image/png", "JPEG": "image/jpeg", "WEBP": "image/webp", "GIF": "image/gif"}
# One stored copy serves every provider: Anthropic wants every image at most 2000 px when a
# request holds more than 20, OpenAI fits `high` detail into 2048 px, and Anthropic takes at
# most 5 MB of base64 (3.75 MB of bytes) per image.
MAX_EDGE = 2000
MAX_STORED_IMAGE_BYTES = 3_750_000
# Refused before any pixel is decoded: no camera makes more, and a bomb claims far more.
MAX_SIDE = 12_000
MAX_PIXELS = 60_000_000
MAX_PDF_PAGES = 600

TEXT_TYPES = {
    ".txt": "text/plain", ".text": "text/plain", ".log": "text/plain",
    ".md": "text/markdown", ".markdown": "text/markdown",
    ".csv": "text/csv", ".tsv": "text/tab-separated-values",
    ".json": "application/json", ".yaml": "text/yaml", ".yml": "text/yaml", ".toml": "text/plain",
    ".xml": "text/xml", ".html": "text/plain", ".htm": "text/plain", ".css": "text/css",
    ".py": "text/x-python", ".js": "text/javascript", ".ts": "text/plain", ".tsx": "text/plain",
    ".jsx": "text/plain", ".java": "text/plain", ".kt": "text/plain", ".go": "text/plain",
    ".rs": "text/plain", ".rb": "text/plain", ".php": "text/plain", ".c": "text/plain",
    ".h": "text/plain", ".cpp": "text/plain", ".hpp": "text/plain", ".cs": "text/plain",
    ".swift": "text/plain", ".sh": "text/plain", ".sql": "text/plain", ".r": "text/plain",
    ".ini": "text/plain", ".cfg": "text/plain", ".env": "text/plain", ".srt": "text/plain",
    ".tex": "text/plain", ".rst": "text/plain", ".ipynb": "application/json",
}  # fmt: skip
# HTML and the like are kept and read as text, never served as what they are.


class Refused(ValueError):
    """The file cannot be attached; the message says why, in words a person can act on."""


@dataclass(frozen=True)
class Sniffed:
    kind: Kind
    media_type: str
    data: bytes  # what is stored and sent: the re-encoded image, the PDF or the text as sent
    width: int | None = None
    height: int | None = None
    pages: int | None = None


def sniff(data: bytes, name: str) -> Sniffed:
    """The file `data` (sent as `name`) as Parley keeps it; Refused when it cannot be."""
    if not data:
        raise Refused(f"“{name}” is empty.")
    head = data[:2048].lstrip()
    suffix = PurePath(name).suffix.lower()
    if suffix == ".svg" or (head[:5].lower() == b"<?xml" and b"<svg" in head.lower()):
        raise Refused(f"“{name}” is an SVG image, which can carry scripts: export it as PNG.")
    if head.startswith(b"%PDF-"):
        return _pdf(data, name)
    image = _image(data, name)
    if image is not None:
        return image
    if suffix in TEXT_TYPES:
        return _text(data, name, TEXT_TYPES[suffix])
    raise Refused(
        f"“{name}” is not a file Parley can attach: images (PNG, JPEG, WebP, GIF), PDFs, and "
        "text files (plain text, Markdown, CSV, source code) are."
    )


# A decoder handed a hostile file can fail in more ways than it documents (a truncated read,
# a bad table, a recursion): at this boundary any of them means "damaged", never a 500.
DAMAGED_FILE = Exception


def _image(data: bytes, name: str) -> Sniffed | None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", Image.DecompressionBombWarning)
        try:
            source = Image.open(io.BytesIO(data), formats=list(IMAGE_FORMATS))
        except UnidentifiedImageError:
            return None
        except (Image.DecompressionBombError, Image.DecompressionBombWarning):
            raise Refused(f"“{name}” claims more pixels than any photo has.") from None
        except DAMAGED_FILE as exc:
            raise Refused(f"“{name}” is a damaged image ({_said(exc)}).") from None
        with source:
            width, height = source.size
            if max(width, height) > MAX_SIDE or width * height > MAX_PIXELS:
                raise Refused(
                    f"“{name}” is {width} by {height} pixels; Parley takes images up to "
                    f"{MAX_SIDE} pixels a side and {MAX_PIXELS // 1_000_000} megapixels."
                )
            try:
                source.seek(0)  # the first frame of an animation
                picture = ImageOps.exif_transpose(source)
                picture.load()
                return _reencoded(picture, source.format or "PNG")
            except Image.DecompressionBombError:
                raise Refused(f"“{name}” claims more pixels than any photo has.") from None
            except DAMAGED_FILE as exc:
                raise Refused(
                    f"“{name}” is a damaged {source.format} image ({_said(exc)})."
                ) from None


def _said(exc: BaseException) -> str:
    """An exception as a short clause for a person: its words, else its kind."""
    return (str(exc) or type(exc).__name__)[:200]


def _reencoded(picture: Image.Image, source_format: str) -> Sniffed:
    """A fresh image without metadata, in PNG (lossless, where the source was, or had
    transparency), else JPEG, shrunk until it fits the per-image limit."""
    has_alpha = picture.mode in ("RGBA", "LA", "PA") or "transparency" in picture.info
    lossless = source_format in ("PNG", "GIF") or has_alpha
    picture = picture.convert("RGBA" if has_alpha else "RGB")
    edge = MAX_EDGE
    while True:
        scaled = picture.copy()
        scaled.thumbnail((edge, edge), Image.Resampling.LANCZOS)
        out = io.BytesIO()
        if lossless:
            scaled.save(out, format="PNG", optimize=False)
        else:
            scaled.save(out, format="JPEG", quality=88, optimize=True)
        if out.tell() <= MAX_STORED_IMAGE_BYTES or edge <= 512:
            break
        if lossless and not has_alpha:
            lossless = False  # a photo saved as PNG: JPEG keeps it under the limit
        else:
            edge = int(edge * 0.8)
    return Sniffed(
        kind="image",
        media_type="image/png" if lossless else "image/jpeg",
        data=out.getvalue(),
        width=scaled.width,
        height=scaled.height,
    )


def _pdf(data: bytes, name: str) -> Sniffed:
    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted:
            raise Refused(f"“{name}” is password-protected: save a copy without the password.")
        pages = len(reader.pages)
    except Refused:
        raise
    except DAMAGED_FILE as exc:
        raise Refused(f"“{name}” is not a readable PDF ({_said(exc)}).") from None
    if pages > MAX_PDF_PAGES:
        raise Refused(f"“{name}” has {pages} pages; Parley takes PDFs up to {MAX_PDF_PAGES}.")
    return Sniffed(kind="pdf", media_type="application/pdf", data=data, pages=pages)


def _text(data: bytes, name: str, media_type: str) -> Sniffed:
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise Refused(
            f"“{name}” is not UTF-8 text: save it as UTF-8 and attach it again."
        ) from None
    if "\x00" in text:
        raise Refused(f"“{name}” holds binary data, not text.")
    if not text:
        raise Refused(f"“{name}” is empty.")  # nothing but a byte-order mark
    return Sniffed(kind="text", media_type=media_type, data=text.encode())


def pdf_text(data: bytes, *, max_chars: int = 200_000) -> str:
    """A PDF's text, page by page (the stand-in for a model that cannot read PDFs); a page
    whose text cannot be read is said to be so."""
    try:
        reader = PdfReader(io.BytesIO(data))
        pages = list(reader.pages)
    except DAMAGED_FILE as exc:
        return f"[the PDF's text could not be read: {_said(exc)}]"
    pieces: list[str] = []
    size = 0
    for number, page in enumerate(pages, start=1):
        try:
            text = (page.extract_text() or "").strip()
        except DAMAGED_FILE:
            text = ""
        piece = f"[page {number}]\n{text}" if text else f"[page {number}: no text]"
        pieces.append(piece)
        size += len(piece)
        if size >= max_chars:
            pieces.append("[the rest of the document is left out]")
            break
    return "\n\n".join(pieces)[:max_chars]


def pdf_pages(data: bytes, *, max_chars: int) -> list[str] | None:
    """Each page's text, in order, up to `max_chars` in all (a page that cannot be read is
    empty); None when the PDF cannot be opened or is encrypted."""
    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted:
            return None
        pages = list(reader.pages)
    except DAMAGED_FILE:
        return None
    texts: list[str] = []
    size = 0
    for page in pages:
        try:
            text = page.extract_text() or ""
        except DAMAGED_FILE:
            text = ""
        texts.append(text[: max(0, max_chars - size)])
        size += len(text)
        if size >= max_chars:
            break
    return texts


def pdf_first_page(data: bytes, *, edge: int = 800) -> bytes | None:
    """A PDF's first page as a PNG at most `edge` pixels on its long side (None when PDFium
    cannot draw it: the PDF is still attached and read)."""
    return pdf_page_picture(data, number=1, edge=edge)


def pdf_page_picture(data: bytes, *, number: int, edge: int = 800) -> bytes | None:
    """Page `number` (from 1) of a PDF as a PNG at most `edge` pixels on its long side; None
    when PDFium cannot draw it or there is no such page."""
    import pypdfium2

    try:
        document = pypdfium2.PdfDocument(data)
        try:
            if not 1 <= number <= len(document):
                return None
            page = document[number - 1]
            width, height = page.get_size()
            picture = page.render(scale=edge / max(width, height, 1.0)).to_pil()
        finally:
            document.close()
    except DAMAGED_FILE:
        return None
    out = io.BytesIO()
    picture.convert("RGB").save(out, format="PNG")
    return out.getvalue()


COLOUR_NAMES = {
    "black": (20, 20, 20), "dark grey": (80, 80, 80), "grey": (150, 150, 150),
    "white": (240, 240, 240), "red": (200, 40, 40), "orange": (235, 140, 40),
    "yellow": (235, 215, 60), "green": (60, 160, 70), "dark green": (30, 80, 40),
    "teal": (40, 150, 150), "light blue": (130, 180, 235), "blue": (40, 90, 200),
    "dark blue": (25, 35, 90), "purple": (120, 60, 170), "pink": (235, 130, 180),
    "brown": (120, 80, 45), "beige": (220, 200, 160),
}  # fmt: skip


def pixel_facts(data: bytes) -> str:
    """What can be said of an image without a model that sees: its size, shape, main colours
    and brightness — the stand-in when no configured model reads images."""
    with Image.open(io.BytesIO(data), formats=list(IMAGE_FORMATS)) as source:
        width, height = source.size
        small = source.convert("RGB")
        small.thumbnail((64, 64))
    shape = "wide" if width > height * 1.2 else "tall" if height > width * 1.2 else "square"
    counts: dict[str, int] = {}
    raw = small.tobytes()
    pixels = [tuple(raw[i : i + 3]) for i in range(0, len(raw), 3)]
    for pixel in pixels:
        name = min(
            COLOUR_NAMES,
            key=lambda n: sum((a - b) ** 2 for a, b in zip(pixel, COLOUR_NAMES[n], strict=True)),
        )
        counts[name] = counts.get(name, 0) + 1
    main = sorted(counts.items(), key=lambda item: -item[1])
    colours = [f"{name} ({count * 100 // len(pixels)}%)" for name, count in main[:3]
               if count * 10 >= len(pixels)]  # fmt: skip
    light = sum(sum(pixel) for pixel in pixels) / (3 * 255 * len(pixels))
    tone = "dark" if light < 0.35 else "light" if light > 0.65 else "mid-toned"
    return (
        f"a {shape} {tone} picture, {width} by {height} pixels, mostly "
        f"{', '.join(colours) or 'many colours'}"
    )


AVATAR_EDGE = 512


def avatar(data: bytes, name: str) -> Sniffed:
    """A picture to show as a role's avatar: any image `sniff` takes, re-encoded the same way,
    then shrunk to at most AVATAR_EDGE pixels a side and kept as PNG."""
    kept = sniff(data, name)
    if kept.kind != "image":
        raise Refused(f"“{name}” is not an image: an avatar is a PNG, JPEG, WebP or GIF.")
    with Image.open(io.BytesIO(kept.data)) as picture:
        picture.thumbnail((AVATAR_EDGE, AVATAR_EDGE), Image.Resampling.LANCZOS)
        out = io.BytesIO()
        picture.save(out, format="PNG")
        return Sniffed("image", "image/png", out.getvalue(), picture.width, picture.height)
