"""A message's attachments as one model takes them (TECH_NOTES §11.7).

A model that reads a kind gets it as an image or document part, named in the text just before
it ("[image 2 of this message: chart.png]") so that roles can refer to "the second image", with
the stored bytes — the same every time, so a second role or a later turn reads them from the
cached prefix. A model that cannot read a kind gets a stand-in in words: a PDF's extracted text,
an image's description (written once by a model that can see, kept on the attachment), or,
until there is one, what is known of the image. Text files are text for every model.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from apps.attachments.bounded import pdf_text
from apps.chat.models import Attachment, AttachmentKind
from apps.providers.description import Reads
from apps.providers.types import ChatRequest, Part

PDF_STAND_IN_CHARS = 60_000  # about 15k tokens of a document's text
TEXT_FILE_CHARS = 60_000


@dataclass
class MessageMedia:
    """What the requests of a reply carry of its history's attachments."""

    parts: dict[int, tuple[Part, ...]] = field(default_factory=dict)  # by message id
    blobs: dict[str, bytes] = field(default_factory=dict)  # by attachment id
    # Images the model cannot see that have no description yet: written before the request.
    undescribed: list[int] = field(default_factory=list)
    # Who wrote each description the model reads instead of an image (for the Details).
    described_by: list[str] = field(default_factory=list)


def media_for(message_ids: list[int], reads: Reads) -> MessageMedia:
    media = MessageMedia()
    attachments = Attachment.objects.filter(message_id__in=message_ids).order_by(
        "message_id", "position", "pk"
    )
    by_message: dict[int, list[Attachment]] = {}
    for attachment in attachments:
        by_message.setdefault(attachment.message_id or 0, []).append(attachment)
    for message_id, items in by_message.items():
        parts: list[Part] = []
        counts = dict.fromkeys(AttachmentKind, 0)
        for attachment in items:
            counts[AttachmentKind(attachment.kind)] += 1
            label = f"{attachment.get_kind_display()} {counts[AttachmentKind(attachment.kind)]}"
            parts += _parts(attachment, label, reads, media)
        media.parts[message_id] = tuple(parts)
    return media


def _parts(attachment: Attachment, label: str, reads: Reads, media: MessageMedia):
    name = f"[{label} of this message: {attachment.name}"
    readable = {
        AttachmentKind.IMAGE: ("image", reads.images),
        AttachmentKind.PDF: ("document", reads.pdfs),
    }
    part_type, reads_it = readable.get(AttachmentKind(attachment.kind), ("", False))
    if not reads_it:
        if attachment.kind == AttachmentKind.IMAGE:
            if attachment.stand_in:
                media.described_by.append(attachment.described_by)
            else:
                media.undescribed.append(attachment.pk)
        return [{"type": "text", "text": f"{name}, {stand_in(attachment)}]"}]
    media.blobs[str(attachment.public_id)] = attachment_bytes(attachment)
    return [{"type": "text", "text": f"{name}]"}, media_part(attachment, part_type)]


def media_part(attachment: Attachment, part_type: str) -> Part:
    """The image or document part naming an attachment (its bytes go in the request's blobs
    under the same key)."""
    return {"type": part_type, "attachment": str(attachment.public_id),
            "media_type": attachment.media_type, "name": attachment.name}  # fmt: skip


def stand_in(attachment: Attachment) -> str:
    """The words for an attachment a model cannot read (a PDF's text is read once, kept)."""
    if attachment.kind == AttachmentKind.TEXT:
        text = attachment_bytes(attachment).decode()[:TEXT_FILE_CHARS]
        return f"a text file; its content:\n{text}\n[end of {attachment.name}]"
    if attachment.kind == AttachmentKind.PDF:
        if not attachment.stand_in:
            attachment.stand_in = pdf_text(
                attachment_bytes(attachment), max_chars=PDF_STAND_IN_CHARS
            )
            Attachment.objects.filter(pk=attachment.pk).update(stand_in=attachment.stand_in)
        return f"a PDF of {attachment.pages} pages; its text:\n{attachment.stand_in}"
    size = f"{attachment.width}x{attachment.height} pixels"
    if attachment.stand_in:
        return f"an image ({size}) you cannot see; a description of it: {attachment.stand_in}"
    return f"an image ({size}) you cannot see; it could not be described just now"


def attachment_bytes(attachment: Attachment) -> bytes:
    with attachment.file.open("rb") as handle:
        return handle.read()


def media_summary(request: ChatRequest) -> str:
    """What a request carries of attachments as themselves, for the reply's Details ("" for
    none): "2 images, 1 PDF (1.3 MB), in the cached prefix"."""
    counts = {"image": 0, "document": 0}
    for message in request.messages:
        for part in message.parts:
            if part.get("type") in counts:
                counts[part["type"]] += 1
    if not any(counts.values()):
        return ""
    size = sum(len(data) for data in request.blobs.values())
    words = [f"{n} image{'s' if n != 1 else ''}" for n in [counts["image"]] if n]
    words += [f"{n} PDF{'s' if n != 1 else ''}" for n in [counts["document"]] if n]
    return f"{', '.join(words)} ({size / 1_048_576:.1f} MB), in the cached prefix"
