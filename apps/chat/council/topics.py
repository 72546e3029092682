"""Does a message start a new topic? A heuristic with a confidence, after design 002's gate.

Parley never drops history on its own (every role must see the shared transcript, and the
prompt cache depends on it); a confident "new topic" only offers the person a new chat.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass

from apps.chat.models import Message, MessageKind, Thread
from apps.chat.selectors import transcript_messages

logger = logging.getLogger(__name__)

FOLLOW_UP = "follow_up"
NEW_TOPIC = "new_topic"
# A notice is offered from this confidence on.
OFFER_CONFIDENCE = 0.7
FIRST_MESSAGE = "first message"

FOLLOW_UP_PHRASES = (
    "also", "additionally", "another thing", "what about", "how about", "and what",
    "you mentioned", "you said", "earlier you said", "going back to", "regarding that",
    "as you said", "same scene", "that character", "the scene", "can you", "could you also",
    "shorter", "longer", "more detail", "expand on", "continue", "go on", "instead",
)  # fmt: skip
NEW_TOPIC_PHRASES = (
    "new question", "different question", "switching topics", "change of topic",
    "new topic", "unrelated", "actually,", "by the way", "separate question",
    "quick question", "something else", "on another note", "different subject",
)  # fmt: skip
PRONOUNS = ("it", "they", "that", "this", "those", "these", "he", "she", "them", "its")
WORD = re.compile(r"[a-z0-9][a-z0-9'-]{2,}")
_STOPWORDS = (
    "the and for are but not you all any can had her was one our out has him his how man new "
    "now old see two way who its let put say she too use that with have this will your from "
    "they know want been good much some time very when come here just like long make many "
    "more only over such take than them well were what about would there their which could "
    "should into also then these those does please thanks"
)
STOPWORDS = frozenset(_STOPWORDS.split())


@dataclass(frozen=True)
class Topic:
    mode: str
    confidence: float
    reason: str

    @property
    def offers_new_chat(self) -> bool:
        """A confident new topic in a thread that has history: offer the person a new chat."""
        return (
            self.mode == NEW_TOPIC
            and self.confidence >= OFFER_CONFIDENCE
            and self.reason != FIRST_MESSAGE
        )

    def as_dict(self) -> dict:
        return {
            "mode": self.mode,
            "confidence": self.confidence,
            "reason": self.reason,
            "offer": self.offers_new_chat,
        }


def _words(text: str) -> set[str]:
    return {word for word in WORD.findall(text.lower()) if word not in STOPWORDS}


def _has_phrase(text: str, phrase: str) -> bool:
    return re.search(rf"(?<![a-z]){re.escape(phrase)}(?![a-z])", text) is not None


def detect_topic(text: str, *, earlier: list[str]) -> Topic:
    """Whether `text` follows on from the `earlier` transcript texts (latest last)."""
    if not earlier:
        return Topic(NEW_TOPIC, 1.0, FIRST_MESSAGE)
    lower = " ".join(text.lower().split())
    follow = sum(_has_phrase(lower, phrase) for phrase in FOLLOW_UP_PHRASES)
    new = sum(_has_phrase(lower, phrase) for phrase in NEW_TOPIC_PHRASES)
    if new > follow:
        return Topic(NEW_TOPIC, min(0.95, 0.75 + 0.1 * (new - follow)), "new-topic phrase")
    if follow > new:
        return Topic(FOLLOW_UP, min(0.95, 0.75 + 0.1 * (follow - new)), "follow-up phrase")
    if lower.split(" ", 1)[0].strip(",.'?!") in PRONOUNS:
        return Topic(FOLLOW_UP, 0.7, "starts with a reference")
    words = _words(text)
    context = _words(" ".join(earlier[-4:]))
    if len(words) < 4 or len(lower.split()) < 10:
        return Topic(FOLLOW_UP, 0.5, "short message")
    overlap = len(words & context) / len(words)
    if overlap >= 0.25:
        return Topic(FOLLOW_UP, 0.8, f"shares {overlap:.0%} of its words with the last turn")
    if overlap <= 0.05:
        return Topic(NEW_TOPIC, 0.75, f"shares {overlap:.0%} of its words with the last turn")
    return Topic(NEW_TOPIC, 0.5, f"shares {overlap:.0%} of its words with the last turn")


def topic_of(*, thread: Thread, text: str) -> dict:
    """The detected topic of a message about to be posted, logged and stored with it."""
    recent = Message.objects.filter(thread=thread, kind=MessageKind.CHAT).order_by("-seq")[:6]
    earlier = [message.text for message in reversed(recent) if message.text]
    if not earlier and thread.forked_from_id:  # a fresh branch follows on from its fork point
        earlier = [message.text for message in transcript_messages(thread=thread)[-6:]]
    topic = detect_topic(text, earlier=earlier)
    logger.info(
        "Topic of a message in thread %s: %s (%.2f, %s)",
        thread.pk, topic.mode, topic.confidence, topic.reason,
    )  # fmt: skip
    return topic.as_dict()
