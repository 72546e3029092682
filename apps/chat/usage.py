"""Usage reads: tokens, timings and cost summed by the database over settled replies — a
session's, a thread's, the last turn's, the most recent replies' — priced by the price table,
and which providers and models a thread has used."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.db.models import Count, F, IntegerField, Max, Min, Q, QuerySet, Sum, Window
from django.db.models.fields.json import KT
from django.db.models.functions import Cast, Coalesce, RowNumber

from apps.chat.models import Message, Session, Thread, Turn
from apps.providers.pricing import USAGE_KEYS, PriceTable, format_money

RECENT_REPLIES = 20  # the rolling window of the "recent" figures


@dataclass(frozen=True)
class UsageSummary:
    replies: int
    input_tokens: int
    output_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int
    avg_duration_ms: int | None
    avg_ttft_ms: int | None
    truncated: int = 0  # replies that reached the length limit at least once
    cut_off: int = 0  # ... and were still cut off after their continuations
    cost: Decimal = Decimal(0)  # of the replies whose model has a price
    cache_saved: Decimal = Decimal(0)
    unpriced: int = 0  # replies whose model has no price (not in `cost`)

    @property
    def cost_text(self) -> str:
        return format_money(self.cost if self.replies > self.unpriced else None)

    @property
    def cache_saved_text(self) -> str:
        return format_money(self.cache_saved if self.replies > self.unpriced else None)

    @property
    def truncation_share(self) -> float | None:
        return self.truncated / self.replies if self.replies else None

    @property
    def recovery_share(self) -> float | None:
        """Of the truncated replies, the share the continuations completed."""
        return (self.truncated - self.cut_off) / self.truncated if self.truncated else None

    @property
    def cache_hit_share(self) -> float | None:
        """The share of prompt tokens served from the cache."""
        prompt = self.input_tokens + self.cache_read_tokens + self.cache_write_tokens
        return self.cache_read_tokens / prompt if prompt else None


def _tokens(key: str):
    """The sum of one usage figure over the rows, by the database."""
    return Coalesce(Sum(Cast(KT(f"usage__{key}"), IntegerField())), 0)


def _usage_annotations(prefix: str = "", within: Q | None = None) -> dict[str, Any]:
    """Per-group sums of usage and timings (`within`: only the rows it matches)."""

    def rows(condition: Q | None = None) -> Q | None:
        if within is None:
            return condition
        return within if condition is None else within & condition

    truncated = Q(continuations__gt=0) | Q(stop_reason="max_tokens")
    tokens = {
        f"{prefix}{key}": Coalesce(Sum(Cast(KT(f"usage__{key}"), IntegerField()), filter=rows()), 0)
        for key in USAGE_KEYS
    }
    return {
        f"{prefix}count": Count("pk", filter=rows()),
        **tokens,
        f"{prefix}duration_sum": Coalesce(Sum("duration_ms", filter=rows()), 0),
        f"{prefix}duration_count": Count("duration_ms", filter=rows()),
        f"{prefix}ttft_sum": Coalesce(Sum("ttft_ms", filter=rows()), 0),
        f"{prefix}ttft_count": Count("ttft_ms", filter=rows()),
        f"{prefix}truncated_count": Count("pk", filter=rows(truncated)),
        f"{prefix}cut_off_count": Count("pk", filter=rows(Q(stop_reason="max_tokens"))),
    }


# A few replies' own fields: the last turn's and the most recent replies' figures are summed
# here rather than by the database (the aggregate query's building cost more than its rows).
REPLY_FIELDS = ("provider", "model", "thread_id", "usage", "duration_ms", "ttft_ms",
                "continuations", "stop_reason")  # fmt: skip


_SUMMED = ("count", *USAGE_KEYS, "duration_sum", "duration_count", "ttft_sum", "ttft_count",
           "truncated_count", "cut_off_count")  # fmt: skip


def _grouped(replies: list[dict[str, Any]], by: tuple[str, ...]) -> list[dict[str, Any]]:
    """Replies summed per group, as `_usage_annotations` sums them in the database."""
    groups: dict[tuple, dict[str, Any]] = {}
    for reply in replies:
        key = tuple(reply[name] for name in by)
        row = groups.get(key)
        if row is None:
            row = groups[key] = dict(zip(by, key, strict=True)) | dict.fromkeys(_SUMMED, 0)
        usage = reply["usage"] if isinstance(reply["usage"], dict) else {}
        row["count"] += 1
        for name in USAGE_KEYS:
            row[name] += _whole(usage.get(name))
        for name in ("duration", "ttft"):
            if reply[f"{name}_ms"] is not None:
                row[f"{name}_sum"] += reply[f"{name}_ms"]
                row[f"{name}_count"] += 1
        cut_off = reply["stop_reason"] == "max_tokens"
        row["cut_off_count"] += cut_off
        row["truncated_count"] += cut_off or (reply["continuations"] or 0) > 0
    return list(groups.values())


def _summed(replies, prices: PriceTable | None) -> UsageSummary:
    """A few replies' rows (`REPLY_FIELDS`) as one summary, priced per provider and model."""
    return _usage_summary(
        _grouped(list(replies), ("provider", "model")), prices=prices or PriceTable()
    )


def _whole(value: Any) -> int:
    """A usage figure as the database's cast reads it (missing or unreadable: 0)."""
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0


def _usage_summary(
    rows: list[dict[str, Any]], prefix: str = "", prices: PriceTable | None = None
) -> UsageSummary:
    """One summary from rows grouped by provider and model, priced by the price table."""
    rows = [row for row in rows if row[f"{prefix}count"]]
    cost, saved, unpriced = Decimal(0), Decimal(0), 0
    for row in rows:
        usage = {key: row[f"{prefix}{key}"] for key in USAGE_KEYS}
        priced = prices.cost(row["provider"], row["model"], usage) if prices else None
        if priced is None:
            unpriced += row[f"{prefix}count"]
        else:
            cost, saved = cost + priced.amount, saved + priced.cache_saved

    def total(key: str) -> int:
        return sum(row[f"{prefix}{key}"] for row in rows)

    def average(key: str) -> int | None:
        count = total(f"{key}_count")
        return int(total(f"{key}_sum") / count) if count else None

    return UsageSummary(
        replies=total("count"),
        input_tokens=total("input"),
        output_tokens=total("output"),
        cache_read_tokens=total("cache_read"),
        cache_write_tokens=total("cache_write"),
        avg_duration_ms=average("duration"),
        avg_ttft_ms=average("ttft"),
        truncated=total("truncated_count"),
        cut_off=total("cut_off_count"),
        cost=cost,
        cache_saved=saved,
        unpriced=unpriced,
    )


def _per_model(replies: QuerySet[Message], **annotations: Any) -> list[dict[str, Any]]:
    grouped = replies.values("provider", "model").annotate(**annotations).order_by()
    return [dict(row) for row in grouped]


def usage_totals(replies: QuerySet[Message], prices: PriceTable | None = None) -> UsageSummary:
    """Token counts, timings and cost summed by the database over finished replies, in one
    query grouped by provider and model (the price table prices each group)."""
    rows = _per_model(replies, **_usage_annotations())
    return _usage_summary(rows, prices=prices or PriceTable())


def session_and_thread_usage(
    *, session: Session, thread: Thread
) -> tuple[UsageSummary, UsageSummary]:
    """The session's totals and one of its threads' own, in one query (a thread's page)."""
    total, by_thread = session_and_threads_usage(session=session, thread_ids=[thread.pk])
    return total, by_thread[thread.pk]


def session_and_threads_usage(
    *, session: Session, thread_ids: list[int], prices: PriceTable | None = None
) -> tuple[UsageSummary, dict[int, UsageSummary]]:
    """The session's totals and some of its threads' own, in one query grouped by provider,
    model and thread: a session's and its threads' lines after replies settle, not one
    aggregate each. (Prices are per token, so pricing each group and adding is exact.)"""
    rows = [
        dict(row)
        for row in _finished_replies(thread__session=session)
        .values("provider", "model", "thread_id")
        .annotate(**_usage_annotations())
        .order_by()
    ]
    prices = prices or PriceTable()
    return _usage_summary(rows, prices=prices), {
        thread_id: _usage_summary([r for r in rows if r["thread_id"] == thread_id], prices=prices)
        for thread_id in thread_ids
    }


def _finished_replies(**scope) -> QuerySet[Message]:
    # Whispers' replies are left out: these figures are shown to the whole room, and would
    # move for people who cannot see what moved them.
    return (
        Message.objects.filter(**scope, kind="chat", finished_at__isnull=False, private=False)
        .exclude(speaker="user")
        .order_by()
    )


def session_usage(*, session: Session) -> UsageSummary:
    """Token counts, timings and cost over the session's finished replies."""
    return usage_totals(_finished_replies(thread__session=session))


def thread_usage(*, thread: Thread) -> UsageSummary:
    """The same over one thread's own finished replies (not those it inherits)."""
    return usage_totals(_finished_replies(thread=thread))


def last_turn_usage(
    *, session: Session | None = None, thread: Thread | None = None,
    prices: PriceTable | None = None,
) -> UsageSummary:  # fmt: skip
    """The totals of every settled reply of the latest turn (of the thread, else of the
    session): what the last message cost, however many roles answered it."""
    turns = (
        Turn.objects.filter(thread=thread)
        if thread is not None
        else Turn.objects.filter(thread__session=session)
    )
    latest = turns.order_by("-pk").values("pk")[:1]
    return _summed(_finished_replies(turn_id__in=latest).values(*REPLY_FIELDS), prices)


def recent_usage(
    *, session: Session | None = None, thread: Thread | None = None, count: int = RECENT_REPLIES,
    prices: PriceTable | None = None,
) -> UsageSummary:  # fmt: skip
    """The same over the `count` most recently settled replies: rolling averages that follow
    a provider or model switch instead of averaging the whole history."""
    scope = {"thread": thread} if thread is not None else {"thread__session": session}
    latest = _finished_replies(**scope).order_by("-finished_at", "-pk")
    return _summed(latest.values(*REPLY_FIELDS)[:count], prices)


@dataclass(frozen=True)
class ModelRun:
    """A provider and model a thread's replies used, from its first to its last message."""

    provider: str
    model: str
    first_seq: int
    last_seq: int
    replies: int


@dataclass(frozen=True)
class ThreadFigures:
    """What a thread's usage line shows besides its totals."""

    last_turn: UsageSummary
    recent: UsageSummary
    models: list[ModelRun]

    @property
    def switched(self) -> bool:
        return len(self.models) > 1


def threads_figures(
    *, thread_ids: list[int], count: int = RECENT_REPLIES, prices: PriceTable | None = None
) -> dict[int, ThreadFigures]:
    """Each thread's last turn, most recent replies and models, for many threads in four
    queries whatever their number (the usage lines after replies settle); the last turns' and
    recent replies' few rows are summed here."""
    latest_turns = dict(
        Turn.objects.filter(thread_id__in=thread_ids)
        .values("thread_id")
        .annotate(last=Max("pk"))
        .values_list("thread_id", "last")
    )
    by = ("provider", "model", "thread_id")
    turn_rows = _grouped(
        list(_finished_replies(turn_id__in=list(latest_turns.values())).values(*REPLY_FIELDS)),
        by,
    )
    ranked = _finished_replies(thread_id__in=thread_ids).annotate(
        rank=Window(
            RowNumber(),
            partition_by=[F("thread_id")],
            order_by=[F("finished_at").desc(), F("pk").desc()],
        )
    )
    recent_rows = _grouped(
        list(
            _finished_replies(pk__in=ranked.filter(rank__lte=count).values("pk")).values(
                *REPLY_FIELDS
            )
        ),
        by,
    )
    model_rows = list(
        _finished_replies(thread_id__in=thread_ids)
        .values("thread_id", "provider", "model")
        .annotate(first=Min("seq"), last=Max("seq"), n=Count("pk"))
        .order_by("thread_id", "first")
    )
    prices = prices or PriceTable()

    def rows_of(rows: list[dict[str, Any]], thread_id: int) -> list[dict[str, Any]]:
        return [row for row in rows if row["thread_id"] == thread_id]

    return {
        thread_id: ThreadFigures(
            last_turn=_usage_summary(rows_of(turn_rows, thread_id), prices=prices),
            recent=_usage_summary(rows_of(recent_rows, thread_id), prices=prices),
            models=[
                ModelRun(r["provider"], r["model"], r["first"], r["last"], r["n"])
                for r in model_rows
                if r["thread_id"] == thread_id
            ],
        )
        for thread_id in thread_ids
    }


def session_figures(
    *, session: Session, prices: PriceTable | None = None
) -> tuple[UsageSummary, UsageSummary]:
    """The session's last turn and its most recent replies (the strip)."""
    prices = prices or PriceTable()
    return last_turn_usage(session=session, prices=prices), recent_usage(
        session=session, prices=prices
    )
