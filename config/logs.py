"""Log formatting that never lets a key through, whatever an exception or a library says."""

from __future__ import annotations

import logging

from apps.providers.crypto import scrub


class ScrubbingFormatter(logging.Formatter):
    """The whole formatted record (message, traceback) with key-shaped strings masked."""

    def format(self, record: logging.LogRecord) -> str:
        return scrub(super().format(record))
