"""Changes to sessions and threads that must stop or restart their running replies first."""

from __future__ import annotations

from django.db import transaction

from apps.chat.council.replies import session_restart_in_flight, thread_interrupt
from apps.chat.models import Session, Thread
from apps.chat.records.retention import session_files_delete_on_commit
from apps.chat.records.sessions import SettingsChange, session_save_settings
from apps.chat.records.threads import thread_clear_messages, thread_drop_queue


def session_apply_settings(*, session: Session, change: SettingsChange, apply_now: bool) -> Session:
    """Save the session's settings. With `apply_now`, replies in flight restart with them;
    otherwise the running calls finish unchanged and the next turn uses the new settings."""
    session = session_save_settings(session=session, change=change)
    if apply_now:
        session_restart_in_flight(session=session)
    return session


def session_delete(*, session: Session) -> None:
    """Delete a session with its threads; its running replies are stopped first."""
    for thread in session.threads.all():
        thread_drop_queue(thread=thread)
        thread_interrupt(thread=thread)
    with transaction.atomic():
        session_files_delete_on_commit(session)  # its bytes go once the rows have
        session.delete()


def thread_clear(*, thread: Thread) -> Thread:
    """Delete every message of the thread (permanently); branches keep their history. Its
    queued messages go first, so stopping its turn does not start them."""
    thread_drop_queue(thread=thread)
    thread_interrupt(thread=thread)
    return thread_clear_messages(thread=thread)
