"""Everything a claimed reply needs before its provider request leaves, read in one go.

The worker's event loop reaches the database through a small pool of threads shared by every
stream of the process; a reply that took seven trips there before asking its model waited
behind checkpoints and settles seven times. `reply_start` claims the reply and reads the
rest on one trip: who it may speak for, the decrypted key, the transcript, whether it needs
a summary, the request itself, and the bubble that shows it streaming.
"""

from __future__ import annotations

from dataclasses import dataclass

from apps.chat.council import summaries
from apps.chat.council.attachment_parts import MessageMedia
from apps.chat.council.requests import (
    ReplySetup,
    history_media,
    reply_history,
    reply_setup,
    request_for_reply,
    roster_by_handle,
    transcript_entries,
)
from apps.chat.display import events
from apps.chat.records.replies import ClaimedReply, message_claim, reply_secret
from apps.providers.types import NO_AUTH, Auth, ChatRequest


@dataclass
class ReplyStart:
    claim: ClaimedReply
    setup: ReplySetup | None = None
    api_key: str = ""
    base_url: str = ""
    auth: Auth = NO_AUTH
    transcript: list = None  # type: ignore[assignment]
    # Set when the history is too long: the summary is written first, then the request (so
    # too when images the model cannot see need their descriptions written: `media`).
    summary_plan: summaries.SummaryPlan | None = None
    media: MessageMedia | None = None  # the history's attachments, as the reply's model reads
    request: ChatRequest | None = None
    # The "streaming" bubble of a fresh claim (a taken-over one shows its kept text instead).
    streaming_event: dict | None = None


def reply_start(*, message_id: int) -> ReplyStart | None:
    """Claim a queued reply and gather what its request needs; None when it is settled."""
    claim = message_claim(message_id=message_id)
    if claim is None or claim.gave_up:
        return None if claim is None else ReplyStart(claim=claim)
    message = claim.message
    start = ReplyStart(claim=claim, setup=reply_setup(message=message))
    start.api_key, start.base_url, start.auth = reply_secret(message=message)
    history = reply_history(message=message)  # read once for the media and the entries
    start.media = history_media(message=message, history=history)
    start.transcript = transcript_entries(message=message, media=start.media, history=history)
    start.summary_plan = summaries.plan_summary(
        thread_id=message.thread_id, entries=start.transcript
    )
    if start.summary_plan is None and not start.media.undescribed:
        start.request = request_for_reply(
            message=message, transcript=start.transcript, media=start.media
        )
    if not claim.resumed:
        start.streaming_event = events.state_event(
            message=message, seq=0, live_text="", roles=roster_by_handle(message.thread.session)
        )
    return start


def reread_history(*, message) -> tuple[MessageMedia, list]:
    """The history's attachments and entries again (after their descriptions were written)."""
    history = reply_history(message=message)
    media = history_media(message=message, history=history)
    return media, transcript_entries(message=message, media=media, history=history)
