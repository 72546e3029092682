"""Request bodies go to Django as they came, parsed once, by Django, and no bigger than the
stated ceiling.

Twisted, under daphne, also parses every form and multipart POST body into `request.args`,
which daphne never reads: that second parse runs in the reactor thread (a 30 MB upload stalls
every stream of the web process while it runs) and answers a multipart body without parts with
a bare 400 — before the API's authentication and error contract see the request. Twisted
offers the switch (`parsePOSTFormSubmission`); daphne does not pass it on, so it is set here.

Twisted keeps a body in memory below 100 KB and in a temporary file above. Daphne would then
read that file whole into its queue for the app (a 570 MB upload sat in the web process's
memory, which kept it after): instead the file itself is handed to Django (`DiskBodies`), which
reads it in pieces and keeps uploads over FILE_UPLOAD_MAX_MEMORY_SIZE on disk. A body over
PARLEY_MAX_REQUEST_MB is not kept at all: its bytes are dropped as they arrive and the request
is answered 413 with a sentence, so no request can fill the memory or the disk.
"""

from __future__ import annotations

import secrets
import weakref
from contextvars import ContextVar
from functools import wraps
from io import BytesIO
from typing import IO

from django.core.exceptions import RequestAborted
from django.core.handlers.asgi import ASGIHandler

# A body kept on disk, by the token its request carries to Django in BODY_HEADER (a client's
# own header of that name is removed first). Weak: a request that never reaches Django leaves
# nothing behind.
BODY_HEADER = b"x-parley-body-on-disk"
_on_disk: weakref.WeakValueDictionary[str, IO[bytes]] = weakref.WeakValueDictionary()
_token: ContextVar[str | None] = ContextVar("body_on_disk", default=None)


class DiskBodies(ASGIHandler):
    """Django's ASGI handler, reading a body daphne left on disk from its file."""

    async def handle(self, scope, receive, send):
        token = next((v.decode() for k, v in scope.get("headers", []) if k == BODY_HEADER), None)
        reset = _token.set(token)
        try:
            await super().handle(scope, receive, send)
        finally:
            _token.reset(reset)

    async def read_body(self, receive):
        token = _token.get()
        body = _on_disk.pop(token, None) if token else None
        if body is None:
            return await super().read_body(receive)
        message = await receive()  # daphne's one, empty, message
        if message["type"] == "http.disconnect":
            body.close()
            raise RequestAborted()
        body.seek(0)
        return body


TOO_BIG = (
    "This request is over {mb:,} MB, the most one request may carry. Send fewer files at once "
    "(a big export goes in pieces: the Import page and `parley import` do that)."
)


def leave_bodies_to_django() -> None:
    from daphne.http_protocol import WebRequest

    original = WebRequest.__init__
    if getattr(original, "leaves_bodies_to_django", False):
        return

    @wraps(original)
    def init(self, *args, **kwargs):
        kwargs.setdefault("parsePOSTFormSubmission", False)
        original(self, *args, **kwargs)
        self.body_bytes, self.body_too_big = 0, False

    init.leaves_bodies_to_django = True  # type: ignore[attr-defined]
    WebRequest.__init__ = init
    _bound_bodies(WebRequest)


def max_request_bytes() -> int:
    from django.conf import settings

    return settings.PARLEY_MAX_REQUEST_MB * 1024 * 1024


def _bound_bodies(request_class) -> None:
    got_length, handle_chunk, process = (
        request_class.gotLength, request_class.handleContentChunk, request_class.process,
    )  # fmt: skip

    def gotLength(self, length):
        if length is not None and length > max_request_bytes():
            self.body_too_big = True
        got_length(self, None if self.body_too_big else length)

    def handleContentChunk(self, data):
        self.body_bytes += len(data)
        if self.body_bytes > max_request_bytes():
            self.body_too_big = True
        if not self.body_too_big:
            handle_chunk(self, data)

    def refuse_or_process(self):
        if self.body_too_big:
            self.request_start = 0  # daphne's access log reads it
            megabytes = max_request_bytes() // 1048576
            self.basic_error(413, b"Content Too Large", TOO_BIG.format(mb=megabytes))
            return None
        self.requestHeaders.removeHeader(BODY_HEADER)
        if not isinstance(self.content, BytesIO):  # Twisted's temporary file: hand it over
            token = secrets.token_hex(16)
            self.body_on_disk = _on_disk[token] = self.content
            self.content = BytesIO()
            self.requestHeaders.setRawHeaders(BODY_HEADER, [token.encode()])
        return process(self)

    request_class.gotLength = gotLength
    request_class.handleContentChunk = handleContentChunk
    request_class.process = refuse_or_process
