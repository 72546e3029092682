"""Log formatting that never lets a key through, whatever an exception or a library says."""

from __future__ import annotations

import logging

from apps.providers.crypto import scrub


class ScrubbingFormatter(logging.Formatter):
    """The whole formatted record (message, traceback) with key-shaped strings masked."""

    def format(self, record: logging.LogRecord) -> str:
        return scrub(super().format(record))


class ClientGoneFilter(logging.Filter):
    """Drops asyncio's "exception was never retrieved" for a request whose client left before
    its answer (Django raises RequestAborted in a task no one awaits once daphne has dropped
    the request): a closed tab is not an error, and the traceback alarms whoever reads logs."""

    def filter(self, record: logging.LogRecord) -> bool:
        from django.core.exceptions import RequestAborted

        error = record.exc_info[1] if record.exc_info else None
        return not isinstance(error, RequestAborted)
