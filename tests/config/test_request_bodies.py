"""The most one request may carry (issue 45, item 10): a body over PARLEY_MAX_REQUEST_MB is
answered 413 with a sentence as it arrives, with or without a length, and its bytes are never
kept; one under it goes through (to disk, not memory, once over 1 MB)."""

from __future__ import annotations

import httpx
import pytest

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_body_over_the_ceiling_is_refused_with_a_sentence(asgi_server, settings, alice):
    settings.PARLEY_MAX_REQUEST_MB = 2
    url = f"{asgi_server.url}/api/v1/imports"
    with httpx.Client(timeout=30) as client:
        declared = client.post(url, content=b"x" * (3 * 1024 * 1024),
                               headers={"Content-Type": "application/octet-stream"})  # fmt: skip
        assert declared.status_code == 413
        assert "over 2 MB, the most one request may carry" in declared.text

        def chunks():
            for _ in range(48):
                yield b"y" * 65536  # 3 MB with no length: chunked

        streamed = client.post(url, content=chunks())
        assert streamed.status_code == 413 and "Send fewer files at once" in streamed.text
        # Under the ceiling, the request reaches the app (here: the API, which wants a token).
        small = client.post(url, content=b"z" * 1024 * 1024)
        assert small.status_code == 401
