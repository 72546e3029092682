"""The browser tests' shared starting point."""

from __future__ import annotations

import pytest

from apps.chat.records.sessions import session_create
from tests.browser.test_live_chat import log_in


@pytest.fixture
def chat(page, alice, roles):
    """Alice logged in, on the first thread of a fresh session."""
    session = session_create(owner=alice, name="Harbour film")
    log_in(page)
    page.goto(f"/t/{session.active_thread.public_id}/")
    page.session = session
    return page
