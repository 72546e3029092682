"""Request bodies go to Django as they came, parsed once, by Django.

Twisted, under daphne, also parses every form and multipart POST body into `request.args`,
which daphne never reads: that second parse runs in the reactor thread (a 30 MB upload stalls
every stream of the web process while it runs) and answers a multipart body without parts with
a bare 400 — before the API's authentication and error contract see the request. Twisted
offers the switch (`parsePOSTFormSubmission`); daphne does not pass it on, so it is set here.
"""

from __future__ import annotations

from functools import wraps


def leave_bodies_to_django() -> None:
    from daphne.http_protocol import WebRequest

    original = WebRequest.__init__
    if getattr(original, "leaves_bodies_to_django", False):
        return

    @wraps(original)
    def init(self, *args, **kwargs):
        kwargs.setdefault("parsePOSTFormSubmission", False)
        original(self, *args, **kwargs)

    init.leaves_bodies_to_django = True  # type: ignore[attr-defined]
    WebRequest.__init__ = init
