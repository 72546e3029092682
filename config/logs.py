"""Log formatting that never lets a key through, whatever an exception or a library says."""

from __future__ import annotations

import logging
import re

from apps.providers.crypto import scrub

# Paths that carry a secret: an invite link (`/join/<token>/`), a shared thread's link
# (`/shared/<token>/…`).
SECRET_PATH = re.compile(r"(/join/|/shared/)[^/\s?#\"']+")


# A credential put in a query string (`?token=…`, `?access_token=…`, `?api_key=…`): the API
# refuses it there, but the access log would still print the request's line.
SECRET_QUERY = re.compile(
    r"([?&;](?:token|access_token|api_key|apikey|key|auth|password|secret)=)[^&;\s\"'#]*",
    re.IGNORECASE,
)


def redact_paths(text: str) -> str:
    """`text` with the secret part of every such path replaced by `[token]`, and every
    credential in a query string by `[redacted]`."""
    if "/join/" in text or "/shared/" in text:
        text = SECRET_PATH.sub(r"\1[token]", text)
    if "=" in text and "?" in text:
        text = SECRET_QUERY.sub(r"\1[redacted]", text)
    return text


class ScrubbingFormatter(logging.Formatter):
    """The whole formatted record (message, traceback) with key-shaped strings and secret
    paths masked."""

    def format(self, record: logging.LogRecord) -> str:
        return redact_paths(scrub(super().format(record)))


class RefusalFilter(logging.Filter):
    """A refused request (403: a viewer's post, a read-only token) is one line, not a
    traceback: it is the app saying no, not an error to investigate."""

    def filter(self, record: logging.LogRecord) -> bool:
        from django.core.exceptions import PermissionDenied

        error = record.exc_info[1] if record.exc_info else None
        if isinstance(error, PermissionDenied):
            record.exc_info, record.exc_text = None, None
        return True


class ClientGoneFilter(logging.Filter):
    """Drops asyncio's "exception was never retrieved" for a request whose client left before
    its answer (Django raises RequestAborted in a task no one awaits once daphne has dropped
    the request): a closed tab is not an error, and the traceback alarms whoever reads logs."""

    def filter(self, record: logging.LogRecord) -> bool:
        from django.core.exceptions import RequestAborted

        error = record.exc_info[1] if record.exc_info else None
        return not isinstance(error, RequestAborted)
