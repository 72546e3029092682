"""What a tab's socket reads of the database, each in one short call the socket runs on a
database thread: may the person read (or talk in) the thread, and their finished
"while you were away" card."""

from __future__ import annotations

from apps.chat.access import Need
from apps.chat.display.rooms import render_digest
from apps.chat.models import Digest, Thread
from apps.chat.selectors import threads_for_user


def readable_thread(user, public_id) -> Thread | None:
    """The thread, when `user` may read it (the owner, a member, a viewer)."""
    return (
        threads_for_user(user=user, need=Need.READ)
        .select_related("session")
        .filter(public_id=public_id)
        .first()
    )


def may_talk(*, user, thread: Thread) -> bool:
    if thread.session.owner_id == user.pk:
        return True  # the owner talks everywhere: no membership to look up
    return threads_for_user(user=user, need=Need.TALK).filter(pk=thread.pk).exists()


def tab_access(user, public_id) -> tuple[Thread | None, bool]:
    """The thread when `user` may still read it, and whether they may talk there: one call
    of a sync (a restarted web process takes every tab's sync at once, one call after another
    on its database thread)."""
    thread = readable_thread(user, public_id)
    return thread, thread is not None and may_talk(user=user, thread=thread)


def written_digest(*, user, digest_id: int, thread_pk: int) -> str:
    """The person's card for this thread once it is no longer being written ("" while it is:
    its push is still to come)."""
    digest = (
        Digest.objects.filter(pk=digest_id, user=user, thread_id=thread_pk)
        .exclude(status=Digest.Status.PENDING)
        .first()
    )
    return str(render_digest(digest)) if digest is not None else ""
