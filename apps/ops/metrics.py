"""Prometheus metrics of every Parley process on a host, summed when they are scraped.

prometheus_client's multiprocess mode: each process writes its samples to files in one
folder and a scrape adds them up, so `/metrics` on any web process shows the whole host (its
web processes and its workers). The folder must be known before the client is imported
(otherwise each process counts in memory only), so this module, the only one that imports
it, sets it first: PROMETHEUS_MULTIPROC_DIR when given, else `var/metrics`. `make run`'s
launcher empties it when it starts; on a team's servers it is a folder emptied at boot.
"""

from __future__ import annotations

import os
from pathlib import Path


def metrics_dir() -> Path:
    folder = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if not folder:
        var = os.environ.get("PARLEY_VAR_DIR") or str(Path(__file__).resolve().parents[2] / "var")
        folder = os.environ["PROMETHEUS_MULTIPROC_DIR"] = os.path.join(var, "metrics")
    Path(folder).mkdir(parents=True, exist_ok=True)
    return Path(folder)


METRICS_DIR = metrics_dir()

from prometheus_client import Counter, Gauge, Histogram  # noqa: E402 (after the folder is set)

# Seconds: a first token from a fast local model to a slow reasoning one; a reply up to the
# reply timeout.
_FIRST_TOKEN_BUCKETS = (0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60)
_REPLY_BUCKETS = (0.5, 1, 2, 5, 10, 20, 40, 80, 160, 320, 600)

LIVE_STREAMS = Gauge(
    "parley_live_streams", "Replies streaming now, on every worker of the host",
    multiprocess_mode="livesum",
)  # fmt: skip
REPLIES = Counter(
    "parley_replies", "Replies settled, by provider and how they ended (done, interrupted, error)",
    ["provider", "status"],
)  # fmt: skip
TOKENS = Counter(
    "parley_tokens", "Tokens of settled replies, by provider: read (input) and written (output)",
    ["provider", "direction"],
)  # fmt: skip
FIRST_TOKEN = Histogram(
    "parley_reply_first_token_seconds", "From a reply's start on a worker to its first text",
    ["provider"], buckets=_FIRST_TOKEN_BUCKETS,
)  # fmt: skip
REPLY_TIME = Histogram(
    "parley_reply_seconds", "From a reply's start on a worker to its end",
    ["provider"], buckets=_REPLY_BUCKETS,
)  # fmt: skip
TAKEOVERS = Counter(
    "parley_takeovers",
    "Replies another run continued: its worker stopped (handed_over) or died (lapsed)",
    ["cause"],
)  # fmt: skip
FAILED_JOBS = Counter("parley_failed_jobs", "Background tasks that raised, by task", ["task"])


def reply_settled(*, provider: str, status: str, usage: dict, ttft_ms: int | None,
                  duration_ms: int | None) -> None:  # fmt: skip
    """Count a settled reply: its end, its tokens and its times."""
    REPLIES.labels(provider, status).inc()
    for direction in ("input", "output"):
        count = usage.get(direction)
        if isinstance(count, int) and count > 0:
            TOKENS.labels(provider, direction).inc(count)
    if ttft_ms is not None:
        FIRST_TOKEN.labels(provider).observe(ttft_ms / 1000)
    if duration_ms is not None:
        REPLY_TIME.labels(provider).observe(duration_ms / 1000)


def process_gone(pid: int) -> None:
    """A process of the host ended: its share of the live gauges no longer counts."""
    from prometheus_client import multiprocess

    multiprocess.mark_process_dead(pid, str(METRICS_DIR))


def start_afresh() -> None:
    """Forget the samples of processes that ran before (`make run` starting again): their
    files would otherwise be summed in for ever."""
    for stale in METRICS_DIR.glob("*.db"):
        stale.unlink(missing_ok=True)
