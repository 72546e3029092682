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


def may_talk(*, user, thread_pk: int) -> bool:
    return threads_for_user(user=user, need=Need.TALK).filter(pk=thread_pk).exists()


def written_digest(*, user, digest_id: int, thread_pk: int) -> str:
    """The person's card for this thread once it is no longer being written ("" while it is:
    its push is still to come)."""
    digest = (
        Digest.objects.filter(pk=digest_id, user=user, thread_id=thread_pk)
        .exclude(status=Digest.Status.PENDING)
        .first()
    )
    return str(render_digest(digest)) if digest is not None else ""
