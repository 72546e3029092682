"""The browser tests' shared starting point."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from django.conf import settings

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


@pytest.fixture
def shots() -> Path:
    """Where screenshots go: docs/ with PARLEY_SCREENSHOTS=1 (for the README), else var/."""
    target = (
        Path(settings.BASE_DIR / "docs")
        if os.environ.get("PARLEY_SCREENSHOTS")
        else (Path(settings.VAR_DIR) / "screenshots")
    )
    target.mkdir(parents=True, exist_ok=True)
    return target
