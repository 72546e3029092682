"""What posting a message (or running a command) produced, for the view to render."""

from __future__ import annotations

from dataclasses import dataclass, field

from apps.chat.models import Message, QueuedMessage, Session, SessionRole, Thread


@dataclass(frozen=True)
class PostedMessage:
    user_message: Message | None
    replies: list[Message]
    notices: list[Message] = field(default_factory=list)
    redirect_to: Thread | None = None  # a command moved the person to another thread
    queued: QueuedMessage | None = None  # kept until the running turn has settled
    # The session and its roles as the turn read them: the composer's answer shows the same.
    session: Session | None = None
    links: list[SessionRole] | None = None
    # A command changed what every tab's controls show (mutes, modes, budgets): the answer
    # carries them too, so the person sees their change even before their socket follows.
    controls_changed: bool = False

    @property
    def messages(self) -> list[Message]:
        return sorted(
            [m for m in (self.user_message, *self.replies, *self.notices) if m is not None],
            key=lambda m: m.seq,
        )
