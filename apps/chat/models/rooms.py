"""A session's shared room: the people in it besides its owner, the links that let them in,
how far each has read each thread, and the digests written for them when they come back."""

from django.conf import settings
from django.db import models

from apps.chat.models.conversation import Session, Thread


class ReadMark(models.Model):
    """How far one person has read a thread: settled replies and other people's messages
    after `seen_seq` are unread for them, and their page marks where those start."""

    thread = models.ForeignKey(Thread, on_delete=models.CASCADE, related_name="read_marks")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    seen_seq = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["thread", "user"], name="one_read_mark_per_person")
        ]

    def __str__(self) -> str:
        return f"{self.user} read {self.thread} up to {self.seen_seq}"


class BudgetDay(models.Model):
    """The tokens one member's replies used in a room on one day. Each reply adds its usage
    when it settles (a retry or a regenerate adds again, never replaces); replies still running
    are reserved against the budget until then (`records.budgets`)."""

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="budget_days")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    day = models.DateField()
    spent = models.PositiveBigIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["session", "user", "day"], name="one_budget_day_per_person"
            )
        ]

    def __str__(self) -> str:
        return f"{self.user} in {self.session} on {self.day}: {self.spent} tokens"


class RoomRole(models.TextChoices):
    MEMBER = "member", "Member — talks to the council and sees everything the room shares"
    VIEWER = "viewer", "Viewer — reads live, cannot post"


class Membership(models.Model):
    """A person other than the owner in a session's room. The owner keeps the credentials,
    models, MCP servers, workspace quota and roles; a member talks, a viewer reads."""

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="room_memberships"
    )
    role = models.CharField(max_length=8, choices=RoomRole.choices, default=RoomRole.MEMBER)
    daily_token_budget = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="Tokens this person's messages may use a day; empty: no limit.",
    )
    added_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
        related_name="+",
    )  # fmt: skip
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["session", "user"], name="one_membership_per_person")
        ]

    def __str__(self) -> str:
        return f"{self.user} in {self.session} ({self.role})"


class RoomInvite(models.Model):
    """A link that lets one person with an account join a room: it works once, expires and can
    be revoked. Only a hash of its token is kept (the link is shown once, when made)."""

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="invites")
    role = models.CharField(max_length=8, choices=RoomRole.choices, default=RoomRole.MEMBER)
    token_hash = models.CharField(max_length=64, unique=True, editable=False)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()
    used_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
        related_name="+",
    )  # fmt: skip
    used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"Invite to {self.session} as {self.role}"


class Digest(models.Model):
    """A "while you were away" card: what happened in a thread between what one person had
    read (`after_seq`) and what there was when they came back (`upto_seq`), written once per
    person and return by a cheap model, in the background."""

    class Status(models.TextChoices):
        PENDING = "pending", "Being written"
        DONE = "done", "Written"
        FAILED = "failed", "Could not be written"

    thread = models.ForeignKey(Thread, on_delete=models.CASCADE, related_name="digests")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    after_seq = models.PositiveIntegerField()
    upto_seq = models.PositiveIntegerField()
    status = models.CharField(max_length=8, choices=Status.choices, default=Status.PENDING)
    text = models.TextField(blank=True)
    provider = models.CharField(max_length=32, blank=True)
    model = models.CharField(max_length=120, blank=True)
    usage = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["thread", "user", "after_seq"], name="one_digest_per_return"
            )
        ]

    def __str__(self) -> str:
        return f"Digest of {self.thread} for {self.user} after #{self.after_seq}"
