import uuid
from typing import TYPE_CHECKING

from django.conf import settings
from django.db import models

if TYPE_CHECKING:
    from apps.roles.models import Role


class AddressingMode(models.TextChoices):
    STICKY = "sticky", "Sticky — unaddressed messages go to the last addressed role"
    BROADCAST = "broadcast", "Broadcast — unaddressed messages go to every unmuted role"


class TurnMode(models.TextChoices):
    BROADCAST = "broadcast", "Broadcast — the first round answers in parallel, then round-robin"
    SEQUENTIAL = "sequential", "Sequential — one role at a time from the start"


REPLY_LENGTHS = {"short": 150, "normal": 0, "long": 800}  # word budgets; 0 = the roles' own
MAX_REPLY_WORDS = 5000


def reply_words(length: str) -> int:
    """A reply-length setting as a word budget: short, normal, long or a number of words."""
    length = (length or "").strip().lower()
    if length in REPLY_LENGTHS:
        return REPLY_LENGTHS[length]
    return int(length) if length.isascii() and length.isdigit() else 0


def parse_reply_length(value: str) -> str:
    """The stored form of a reply length the person typed; ValueError explains a bad one."""
    value = (value or "").strip().lower().removesuffix(" words").removesuffix("words").strip()
    if value in REPLY_LENGTHS:
        return value
    if value.isascii() and value.isdigit() and 10 <= int(value) <= MAX_REPLY_WORDS:
        return str(int(value))
    raise ValueError(
        f"Use short, normal, long or a number of words from 10 to {MAX_REPLY_WORDS:,}."
    )


class ToolMode(models.TextChoices):
    AS_IT_GOES = "as_it_goes", "As it goes (first words soonest)"
    TOOLS_FIRST = "tools_first", "Tools first, then one answer from the evidence"


class Session(models.Model):
    """A user's workspace: configuration shared by every thread in it."""

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="chat_sessions"
    )
    name = models.CharField(max_length=120)
    credential = models.ForeignKey(
        "providers.Credential",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="sessions",
        help_text="Empty: the demo provider answers.",
    )
    model = models.CharField(max_length=120, blank=True, help_text="Blank: the provider default.")
    # The latest versions' names and texts (their history: ContextVersion).
    persona_name = models.CharField(max_length=80, blank=True)
    persona = models.TextField(blank=True, help_text="Context about you, shared with every role.")
    memory_name = models.CharField(max_length=80, blank=True)
    memory = models.TextField(blank=True, help_text="Notes the roles can read.")
    addressing_mode = models.CharField(
        max_length=16, choices=AddressingMode.choices, default=AddressingMode.STICKY
    )
    auto_rounds = models.PositiveSmallIntegerField(
        default=0, help_text="Rounds the roles continue among themselves after a turn; 0 = off."
    )
    turn_mode = models.CharField(
        max_length=16, choices=TurnMode.choices, default=TurnMode.BROADCAST
    )
    round_order = models.JSONField(
        default=list, blank=True,
        help_text="Handles in the order auto-rounds go round; empty: the roles' own order.",
    )  # fmt: skip
    group_rules = models.TextField(
        blank=True, help_text="The instructions every role gets; blank: Parley's default."
    )
    reply_length = models.CharField(
        max_length=16, default="normal", help_text="short, normal, long, or a word budget."
    )
    turn_token_budget = models.PositiveIntegerField(
        default=0, help_text="Tokens a turn's auto-rounds may use in all; 0 = no limit."
    )
    turn_time_limit = models.PositiveIntegerField(
        default=0, help_text="Seconds a turn's auto-rounds may run; 0 = no limit."
    )
    stop_phrase = models.CharField(
        max_length=80, blank=True, help_text="A reply containing it ends the auto-rounds."
    )
    auto_route = models.BooleanField(
        default=False,
        help_text="A message without a mention may go to the role best placed to answer it.",
    )
    tool_mode = models.CharField(
        max_length=16, choices=ToolMode.choices, default=ToolMode.AS_IT_GOES
    )
    library_passages = models.BooleanField(
        default=False,
        help_text="The library's best passages for a message go into the request of the roles "
        "it addresses (for models that cannot call tools).",
    )
    ai_mentions = models.BooleanField(
        default=False, help_text="A reply that mentions @another_role has that role answer next."
    )
    disabled_tools = models.JSONField(
        default=list,
        blank=True,
        help_text="Names of tools (built-in or server__tool) switched off.",
    )
    mcp_servers = models.ManyToManyField(
        "connectors.McpServer", blank=True, related_name="sessions",
        help_text="MCP servers whose tools the roles are offered.",
    )  # fmt: skip
    roles = models.ManyToManyField("roles.Role", through="SessionRole", related_name="sessions")
    active_thread = models.ForeignKey(
        "Thread", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-updated_at"]

    def __str__(self) -> str:
        return self.name


class SessionRole(models.Model):
    """A role taking part in a session, with the session's own settings for it."""

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="session_roles")
    role = models.ForeignKey("roles.Role", on_delete=models.CASCADE, related_name="+")
    muted = models.BooleanField(default=False)
    credential = models.ForeignKey(
        "providers.Credential", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    model_override = models.CharField(max_length=120, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["session", "role"], name="unique_role_per_session")
        ]

    def __str__(self) -> str:
        return f"{self.session} · {self.role}"


class Thread(models.Model):
    """One conversation in a session; forks share their parent's history up to `forked_from`."""

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="threads")
    parent = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.CASCADE, related_name="children"
    )
    forked_from = models.ForeignKey(
        "Message", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    label = models.CharField(max_length=120, blank=True)
    sticky_handle = models.CharField(
        max_length=40, blank=True, help_text="Where messages without a mention go (sticky mode)."
    )
    next_seq = models.PositiveIntegerField(default=1)
    # The persona and memory versions its roles are told (a snapshot taken when it began).
    persona_version = models.ForeignKey(
        "chat.ContextVersion", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    memory_version = models.ForeignKey(
        "chat.ContextVersion", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-updated_at"]

    def __str__(self) -> str:
        return self.label or f"Thread {self.public_id}"


class ThreadSummary(models.Model):
    """A summary of a thread's transcript up to and including `covers`, used in requests
    instead of the messages it covers. Computed once per (thread, covers); every message it
    covers stays stored. `covers` may be a parent thread's message when the thread is a fork.
    """

    thread = models.ForeignKey(Thread, on_delete=models.CASCADE, related_name="summaries")
    covers = models.ForeignKey("Message", on_delete=models.CASCADE, related_name="+")
    text = models.TextField()
    provider = models.CharField(max_length=32, blank=True)
    model = models.CharField(max_length=120, blank=True)
    usage = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["thread", "covers"], name="one_summary_per_point")
        ]

    def __str__(self) -> str:
        return f"Summary of {self.thread} up to message {self.covers_id}"


class Turn(models.Model):
    """The replies one user message set off: parallel stage, answers-last stage, auto-rounds."""

    thread = models.ForeignKey(Thread, on_delete=models.CASCADE, related_name="turns")
    user_message = models.ForeignKey(
        "Message", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    auto_rounds = models.PositiveSmallIntegerField(default=0)
    auto_replies_done = models.PositiveIntegerField(default=0)
    rounds_stopped = models.BooleanField(default=False, help_text="Set by an interrupt.")
    sequential = models.BooleanField(
        default=False, help_text="Its roles answer one at a time, each seeing the ones before."
    )
    mentions_only = models.BooleanField(
        default=False, help_text="A directed turn: only a role a reply mentions answers next."
    )
    reply_length = models.CharField(max_length=16, blank=True, help_text="This turn's budget.")
    stopped_because = models.CharField(max_length=16, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"Turn {self.pk} of {self.thread}"


class TurnStop(models.TextChoices):
    ROUNDS = "rounds", "the round limit"
    TOKENS = "tokens", "the token budget"
    TIME = "time", "the time limit"
    PHRASE = "phrase", "the stop phrase"


class Stage(models.IntegerChoices):
    PARALLEL = 0, "In parallel"
    LAST = 1, "After the others"
    AUTO_ROUND = 2, "Auto-round"


class MessageStatus(models.TextChoices):
    QUEUED = "queued", "Waiting"
    STREAMING = "streaming", "Streaming"
    DONE = "done", "Done"
    ERROR = "error", "Error"
    INTERRUPTED = "interrupted", "Interrupted"


IN_FLIGHT = (MessageStatus.QUEUED, MessageStatus.STREAMING)
TIMED_OUT = "timeout"  # the stop reason of a reply that failed by taking too long


class MessageKind(models.TextChoices):
    CHAT = "chat", "Chat"
    NOTICE = "notice", "Notice (shown, never sent to models)"


USER_SPEAKER = "user"
NOTICE_SPEAKER = "parley"  # notices: shown in the thread, never sent to models


class Message(models.Model):
    """One entry of a thread's shared transcript.

    `content` holds canonical parts: {"type": "text", "text": …},
    {"type": "tool_call", "id", "name", "arguments"} and
    {"type": "tool_result", "tool_call_id", "content", "is_error"}.
    """

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    thread = models.ForeignKey(Thread, on_delete=models.CASCADE, related_name="messages")
    seq = models.PositiveIntegerField()
    speaker = models.CharField(max_length=40, help_text="'user' or a role handle.")
    author = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    kind = models.CharField(max_length=16, choices=MessageKind.choices, default=MessageKind.CHAT)
    content = models.JSONField(default=list, blank=True)
    status = models.CharField(
        max_length=16, choices=MessageStatus.choices, default=MessageStatus.DONE
    )
    error = models.TextField(blank=True)
    provider = models.CharField(max_length=32, blank=True)
    credential = models.ForeignKey(
        "providers.Credential", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    model = models.CharField(max_length=120, blank=True)
    usage = models.JSONField(default=dict, blank=True)
    ttft_ms = models.PositiveIntegerField(null=True, blank=True)
    duration_ms = models.PositiveIntegerField(null=True, blank=True)
    attempt = models.PositiveSmallIntegerField(default=0)
    stop_reason = models.CharField(  # TIMED_OUT for a reply that failed by taking too long
        max_length=16, blank=True, help_text="The provider's last stop reason."
    )
    continuations = models.PositiveSmallIntegerField(
        default=0, help_text="Calls made to continue it after the length limit."
    )
    topic = models.JSONField(
        default=dict, blank=True, help_text="A user message's detected topic mode and confidence."
    )
    turn = models.ForeignKey(
        Turn, null=True, blank=True, on_delete=models.SET_NULL, related_name="messages"
    )
    stage = models.PositiveSmallIntegerField(choices=Stage.choices, default=Stage.PARALLEL)
    dispatched_at = models.DateTimeField(
        null=True, blank=True, help_text="When its task was enqueued; empty while it waits."
    )
    alternatives = models.JSONField(
        default=list, blank=True, help_text="Earlier versions kept when it was regenerated."
    )
    client_token = models.UUIDField(
        null=True, blank=True, editable=False,
        help_text="The composer's token: a form sent twice posts one message.",
    )  # fmt: skip
    log = models.JSONField(
        default=list, blank=True,
        help_text="A reply's event log: tool calls, retries, continuations, takeovers, its end "
        "(t: ms after its run started).",
    )  # fmt: skip
    budget_day = models.ForeignKey(
        "chat.BudgetDay", null=True, blank=True, on_delete=models.SET_NULL,
        related_name="replies", help_text="The member's budget this reply is charged to.",
    )  # fmt: skip
    routed = models.JSONField(
        default=dict, blank=True,
        help_text="Auto-route: the role a message was handed to, why, and from whom.",
    )  # fmt: skip
    # A whisper: only `audience` (people) and `audience_roles` (role handles) see it, and the
    # replies to it are whispers to the same audience.
    private = models.BooleanField(default=False)
    audience = models.ManyToManyField(settings.AUTH_USER_MODEL, blank=True, related_name="+")
    audience_roles = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["thread", "seq"]
        constraints = [
            models.UniqueConstraint(fields=["thread", "seq"], name="unique_seq_per_thread"),
            models.UniqueConstraint(
                fields=["thread", "client_token"],
                condition=models.Q(client_token__isnull=False),
                name="one_message_per_client_token",
            ),
        ]
        indexes = [
            models.Index(fields=["thread", "status"]),
            # The recovery sweep looks at replies in flight every few seconds.
            models.Index(
                fields=["status"],
                condition=models.Q(status__in=["queued", "streaming"]),
                name="message_in_flight",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.speaker} #{self.seq}"

    @property
    def text(self) -> str:
        """Every text part joined, the way the transcript shows it."""
        return "".join(part.get("text", "") for part in self.content if part.get("type") == "text")

    @property
    def is_user(self) -> bool:
        return self.speaker == USER_SPEAKER

    @property
    def in_flight(self) -> bool:
        return self.status in IN_FLIGHT

    @property
    def timed_out(self) -> bool:
        return self.status == MessageStatus.ERROR and self.stop_reason == TIMED_OUT

    @property
    def cut_off(self) -> bool:
        """It ended at the length limit even after its continuations."""
        return self.status == MessageStatus.DONE and self.stop_reason == "max_tokens"


class QueuedMessage(models.Model):
    """A message sent while the thread's turn runs: posted when the turn has settled."""

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    thread = models.ForeignKey(Thread, on_delete=models.CASCADE, related_name="queued")
    author = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    text = models.TextField()
    reply_length = models.CharField(max_length=16, blank=True)
    client_token = models.UUIDField(null=True, blank=True, editable=False)
    send_now = models.BooleanField(default=False, help_text="Jumps the queue.")
    private = models.BooleanField(default=False, help_text="A whisper: its text is not shown.")
    held_because = models.CharField(
        max_length=120, blank=True, help_text="Why it waits for someone to send or drop it."
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["thread", "-send_now", "created_at", "pk"]

    def __str__(self) -> str:
        return f"Queued in {self.thread}: {self.label[:40]}"

    @property
    def author_name(self) -> str:
        return person_name(self.author)

    @property
    def label(self) -> str:
        """What the room may read of it: a whisper's text is for its audience."""
        return "a whisper" if self.private else self.text


class MessageUsage(Message):
    """Messages seen as usage records in the admin (a proxy, no table of its own)."""

    class Meta:
        proxy = True
        verbose_name = "usage record"
        verbose_name_plural = "usage"


def person_name(user) -> str:
    """How Parley names a person to the room and to the roles: their full name, else their
    username."""
    if user is None:
        return "User"
    return user.get_full_name().strip() or user.get_username()


def person_initials(user) -> str:
    words = person_name(user).replace("_", " ").replace(".", " ").split()
    return "".join(word[0] for word in words[:2]).upper() or "?"


def person_hue(user) -> int:
    """A person's own hue, steady for them (their id picks it), for their avatar and border."""
    return (int(user.pk if user is not None else 0) * 137 + 200) % 360


def speaker_name(message: "Message", role: "Role | None") -> str:
    """How a page names who wrote a message (`role`: the role its speaker handle names)."""
    if message.is_user:
        return person_name(message.author) if message.author_id else "User"
    if message.speaker == NOTICE_SPEAKER:
        return "Parley"
    return role.display_name if role else message.speaker
