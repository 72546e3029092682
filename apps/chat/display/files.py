"""An attachment's bytes as an HTTP response, the same for the pages and the API."""

from __future__ import annotations

from django.http import FileResponse, Http404

from apps.attachments.headers import content_disposition
from apps.chat.models import Attachment


def attachment_response(attachment: Attachment, *, preview: bool = False) -> FileResponse:
    """The stored bytes with the sniffed type (never a guess from the name) and `nosniff`:
    images inline (re-encoded, so safe to show), everything else as a download, in a sandbox
    either way. `preview`: a PDF's first page, drawn by Parley as a PNG, inline."""
    if preview:
        if not attachment.preview:
            raise Http404("This attachment has no preview.")
        response = FileResponse(attachment.preview.open("rb"), content_type="image/png")
    else:
        text = attachment.kind == "text"
        response = FileResponse(
            attachment.file.open("rb"),
            content_type=attachment.media_type + ("; charset=utf-8" if text else ""),
        )
        response["Content-Disposition"] = content_disposition(
            attachment.name, inline=attachment.is_image
        )
    response["X-Content-Type-Options"] = "nosniff"
    response["Content-Security-Policy"] = "default-src 'none'; sandbox"
    # The bytes behind an id never change; access may, so only the browser keeps them.
    response["Cache-Control"] = "private, max-age=86400"
    return response
