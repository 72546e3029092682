"""Members' daily token budgets: a reply is charged to the person whose message (or press of
Retry, Regenerate or Continue) started it. Starting replies takes the person's budget row's
lock for the rest of the transaction, so concurrent posts take turns: each sees the tokens
already spent plus an estimate for every reply still running, and once that reaches the budget
nothing more starts. A settled reply adds its usage to the day; nothing is ever replaced."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.db.models import F
from django.utils import timezone

from apps.chat.models import IN_FLIGHT, BudgetDay, Membership, Message, MessageStatus, Session

# What a reply is expected to cost before any of the session's replies has settled.
DEFAULT_REPLY_ESTIMATE = 2_000
ESTIMATE_FROM = 20  # the session's latest settled replies the estimate averages
TOKEN_KEYS = ("input", "output", "cache_read", "cache_write")


def usage_total(usage: dict | None) -> int:
    """Every token a run's usage counts: input (cached or not, cache writes) and output (the
    one-hour cache writes are a part of the cache writes, not more)."""
    return sum(int((usage or {}).get(key) or 0) for key in TOKEN_KEYS)


def reply_estimate(session: Session) -> int:
    """What one reply of this session is expected to cost: its recent replies' average."""
    recent = Message.objects.filter(
        thread__session=session, status=MessageStatus.DONE, usage__isnull=False
    ).exclude(usage={})
    totals = [
        usage_total(u)
        for u in recent.order_by("-pk").values_list("usage", flat=True)[:ESTIMATE_FROM]
    ]
    totals = [t for t in totals if t > 0]
    return max(1, sum(totals) // len(totals)) if totals else DEFAULT_REPLY_ESTIMATE


def _daily_budget(session: Session, person) -> int | None:
    if person is None or person.pk == session.owner_id:
        return None  # the owner pays, and has no budget
    return (
        Membership.objects.filter(session=session, user=person)
        .values_list("daily_token_budget", flat=True)
        .first()
    )


def budget_standing(*, session: Session, person) -> tuple[int, int, int] | None:
    """(budget, tokens spent today, tokens reserved by replies still running), or None for
    someone with no budget here."""
    budget = _daily_budget(session, person)
    if budget is None:
        return None
    day = BudgetDay.objects.filter(session=session, user=person, day=timezone.localdate()).first()
    if day is None:
        return budget, 0, 0
    return budget, day.spent, _reserved(day, session)


def spent_today(*, session: Session, person) -> int:
    """What the replies `person` started in this session used today (budget or not)."""
    day = BudgetDay.objects.filter(session=session, user=person, day=timezone.localdate())
    return day.values_list("spent", flat=True).first() or 0


def _reserved(day: BudgetDay, session: Session) -> int:
    """What the day's replies still running are expected to cost."""
    running = day.replies.filter(status__in=IN_FLIGHT).count()
    return running * reply_estimate(session) if running else 0


def _refusal(budget: int, spent: int, reserved: int) -> ValidationError:
    running = f", and replies still running may use {reserved:,} more" if reserved else ""
    return ValidationError(
        f"You have used your {budget:,} tokens for today in this room ({spent:,} so far"
        f"{running}); the owner sets this budget. It starts again at midnight.",
        code="budget",
    )


def budget_check(*, session: Session, person) -> None:
    """Refuse early (before anything is saved) when nothing is left of the person's budget."""
    standing = budget_standing(session=session, person=person)
    if standing is not None and standing[1] + standing[2] >= standing[0]:
        raise _refusal(*standing)


def budget_reserve(*, session: Session, person, replies: int) -> BudgetDay | None:
    """The day `replies` new replies of `person` are charged to, or a refusal once their
    budget is used up (spent, plus an estimate per reply still running). Call it inside the
    transaction that starts the replies: it holds the budget row's lock until the commit.
    A member without a budget is charged too (a budget the owner sets at noon counts the
    morning's runs, as the People dialog shows them). None: the owner's, or no replies."""
    if person is None or person.pk == session.owner_id or replies <= 0:
        return None
    budget = _daily_budget(session, person)
    day, _ = BudgetDay.objects.get_or_create(session=session, user=person, day=timezone.localdate())
    if budget is None:
        return day
    # Take the row's lock (PostgreSQL's row lock, SQLite's writer lock) before reading it.
    BudgetDay.objects.filter(pk=day.pk).update(spent=F("spent"))
    day.refresh_from_db(fields=["spent"])
    reserved = _reserved(day, session)
    if day.spent + reserved >= budget:
        raise _refusal(budget, day.spent, reserved)
    return day


def budget_spend(*, budget_day_id: int | None, usage: dict | None) -> None:
    """A settled run's usage, added to the day it was charged to."""
    total = usage_total(usage)
    if budget_day_id is not None and total:
        BudgetDay.objects.filter(pk=budget_day_id).update(spent=F("spent") + total)
