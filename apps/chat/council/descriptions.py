"""Descriptions of images for the roles whose models cannot see (issue 35, TECH_NOTES §11.7).

A reply whose model reads text only gets each image of its history as words. The words are
written once per image, when the first such reply needs them, by a model that can see among
those the session already uses (the reply's provider's cheap model first), and kept on the
attachment (and on every other attachment of the same bytes in the session), so later turns
and other roles read the same text — and the cached prefix holds. Without any model that sees,
Parley says what the pixels tell (size, shape, colours), and says that is all it is.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from functools import partial

from channels.db import database_sync_to_async

from apps.attachments.sniff import pixel_facts
from apps.chat import livestate
from apps.chat.council.attachment_parts import attachment_bytes, media_part
from apps.chat.council.once import written_once
from apps.chat.council.summaries import written_text
from apps.chat.display import events
from apps.chat.models import Attachment, Message, SessionRole
from apps.chat.records.text import storable
from apps.providers.models import Credential
from apps.providers.registry import describe, get_adapter
from apps.providers.selectors import model_reads
from apps.providers.types import ChatMessage, ChatRequest, ProviderError, SystemBlock

logger = logging.getLogger(__name__)

DESCRIBE_RULES = (
    "Describe this image for colleagues who cannot see it and must discuss it with the person "
    "who shared it. Say what it shows and how it is laid out; copy any text in it word for "
    "word; give numbers, labels and colours where they matter. Plain prose, at most 250 "
    "words. Describe only what is visible; never guess at what is not."
)
DESCRIBE_MAX_TOKENS = 700
PIXELS_ONLY = "Parley, from the pixels alone (no model that sees images is set up)"
LOCK_SECONDS = 120
WAIT_SECONDS = 90


@dataclass(frozen=True)
class Describer:
    provider: str
    model: str
    credential: Credential

    @property
    def label(self) -> str:
        return f"{describe(self.provider).label} · {self.model}"


def describer_for(message: Message) -> Describer | None:
    """A model that sees, among those the session already pays for: the cheap model, then
    the model, of the reply's credential, the session's and each role's."""
    session = message.thread.session
    candidates = [(message.credential, message.model), (session.credential, session.model)]
    links = SessionRole.objects.filter(session=session, credential__isnull=False)
    candidates += [(link.credential, link.model_override) for link in links.select_related(
        "credential")]  # fmt: skip
    for credential, model in candidates:
        if credential is None:
            continue
        kind = credential.provider
        for name in (describe(kind).cheap_model, model):
            if name and model_reads(provider=kind, model=name).images:
                return Describer(kind, name, credential)
    return None


async def describe_images(attachment_ids: list[int], *, message: Message, redis) -> None:
    """Write the missing descriptions of these images (each once, whoever asks)."""
    describer = await database_sync_to_async(describer_for)(message)
    for attachment_id in attachment_ids:
        await written_once(
            redis,
            f"{livestate.PREFIX}:describe-lock:{attachment_id}",
            stored=partial(database_sync_to_async(_described), attachment_id),
            write=partial(_describe, attachment_id, describer),
            wait_seconds=WAIT_SECONDS,
            lock_seconds=LOCK_SECONDS,
        )


def described_note(described_by: list[str]) -> str:
    """What a reply's Details say of the images its model read as descriptions, whoever
    wrote them and whenever: "2 images described by Anthropic · claude-haiku-4-5"."""
    counts: dict[str, int] = {}
    for by in described_by:
        counts[by or "an earlier model"] = counts.get(by or "an earlier model", 0) + 1
    return "; ".join(
        f"{count} image{'s' if count != 1 else ''} described by {by}"
        for by, count in counts.items()
    )


def _described(attachment_id: int) -> str | None:
    return (
        Attachment.objects.filter(pk=attachment_id).exclude(stand_in="")
        .values_list("stand_in", flat=True).first()
    )  # fmt: skip


async def _describe(attachment_id: int, describer: Describer | None) -> str:
    attachment = await Attachment.objects.aget(pk=attachment_id)
    data = await database_sync_to_async(attachment_bytes)(attachment)
    if describer is None:
        return await _keep(attachment, pixel_facts(data), PIXELS_ONLY)
    parts = (
        {"type": "text", "text": f"The image, “{attachment.name}”:"},
        media_part(attachment, "image"),
    )
    request = ChatRequest(
        model=describer.model,
        system=(SystemBlock(DESCRIBE_RULES),),
        messages=(ChatMessage("user", parts),),
        max_tokens=DESCRIBE_MAX_TOKENS,
        blobs={str(attachment.public_id): data},
    )
    credential = describer.credential
    secret = await database_sync_to_async(
        lambda: (credential.api_key(), credential.base_url, credential.auth())
    )()
    try:
        text, _ = await written_text(
            get_adapter(describer.provider), request,
            api_key=secret[0], base_url=secret[1], auth=secret[2],
        )  # fmt: skip
    except ProviderError as exc:
        logger.warning("Describing attachment %s failed: %s", attachment_id, exc)
        text = ""
    if not text.strip():  # kept for this reply only: the next one asks the model again
        return f"{pixel_facts(data)} (the model that describes images failed just now)"
    return await _keep(attachment, text.strip(), describer.label)


@database_sync_to_async
def _keep(attachment: Attachment, text: str, by: str) -> str:
    """The description, on every attachment of the same bytes in the session."""
    text = storable(text)
    described = Attachment.objects.filter(
        session_id=attachment.session_id, sha256=attachment.sha256, stand_in=""
    )
    shown_in = list(
        Message.objects.filter(attachments__in=described).distinct().select_related("thread")
    )
    described.update(stand_in=text, described_by=by)
    for message in shown_in:  # the open tabs' lightboxes show it now, not after a reload
        events.publish_message_replaced_on_commit(message=message, seq=0)
    return text
