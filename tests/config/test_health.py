"""What a team's balancer, orchestrator and Prometheus ask of Parley, from separate web and
worker processes as the Procfile runs them: `/healthz`, `/readyz` (the database, Redis, the
storage, a worker seen) and `/metrics`, scraped during a reply and after it."""

from __future__ import annotations

import asyncio
import json
import re
import signal
import urllib.error
import urllib.request

import pytest

from apps.chat.models import Message, MessageStatus
from tests.chat.test_faults import cookie_for, numbered_thread, reply_of  # noqa: F401 (fixture)
from tests.conftest import wait_until
from tests.topology import post

pytestmark = pytest.mark.django_db(transaction=True)
TOKEN = "metrics-token-for-the-test-0123456789"


def get(url: str, token: str | None = None) -> tuple[int, str]:
    request = urllib.request.Request(url)
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def sample(text: str, name: str, **labels: str) -> float | None:
    """One sample's value from Prometheus's text format (None when it is not there)."""
    wanted = ",".join(f'{key}="{value}"' for key, value in sorted(labels.items()))
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        found = re.fullmatch(r"([a-z_]+)(?:\{(.*)\})? (\S+)", line)
        if found and found[1] == name and ",".join(sorted((found[2] or "").split(","))) == wanted:
            return float(found[3])
    return None


def scrape_when(web, *, live_streams: float) -> str:
    """The web process's metrics once they show this many live streams."""

    def scraped() -> str | None:
        text = get(f"{web.url}/metrics", token=TOKEN)[1]
        return text if sample(text, "parley_live_streams") == live_streams else None

    return wait_until(scraped, timeout=15)


@pytest.fixture
def topology(topology):
    """The shared topology (tests/conftest.py), its processes given a metrics token."""
    topology.env["PARLEY_METRICS_TOKEN"] = TOKEN
    return topology


def test_healthz_and_readyz_answer_without_sign_in_and_say_what_is_not_ready(topology):
    web = topology.start_web("web")
    assert get(f"{web.url}/healthz") == (200, "ok\n")
    status, body = get(f"{web.url}/readyz")  # no worker yet
    assert status == 503
    assert json.loads(body) == {
        "ready": False,
        "checks": {"database": "ok", "redis": "ok", "storage": "ok", "workers": "failed"},
    }
    worker = topology.start_worker("worker")
    topology.wait_worker_ready(worker)
    status, body = wait_until(lambda: (r := get(f"{web.url}/readyz"))[0] == 200 and r, timeout=15)
    assert json.loads(body)["ready"] is True
    # A worker stopped in order is off the list at once, not after it would have lapsed.
    worker.process.send_signal(signal.SIGTERM)
    worker.process.wait(timeout=30)
    assert get(f"{web.url}/readyz")[0] == 503
    topology.kill_redis()
    status, body = get(f"{web.url}/readyz")
    assert status == 503 and json.loads(body)["checks"]["redis"] == "failed"
    assert get(f"{web.url}/healthz")[0] == 200  # alive all the same: no restart for it
    assert "Traceback" not in web.output()


def test_metrics_are_scraped_during_a_reply_and_count_it_once_settled(
    topology,
    alice,
    numbered_thread,  # noqa: F811 (the fixture)
):
    worker = topology.start_worker("worker")
    web = topology.start_web("web")
    topology.wait_worker_ready(worker)
    assert get(f"{web.url}/metrics")[0] == 401  # no token, no metrics
    assert get(f"{web.url}/metrics", token="a-wrong-token")[0] == 401
    thread = numbered_thread
    asyncio.run(post(web, str(thread.public_id), cookie_for(alice), "@assistant count for me"))
    reply = reply_of(thread)
    wait_until(lambda: Message.objects.get(pk=reply.pk).status == MessageStatus.STREAMING)
    # Scraped on the web process: the worker's live stream, summed in from its own files.
    during = scrape_when(web, live_streams=1.0)
    assert sample(during, "parley_replies_total", provider="openai_compatible",
                  status="done") is None  # fmt: skip
    assert sample(during, "parley_replies_queued") == 0.0
    assert sample(during, "parley_broker_queue_depth") == 0.0
    wait_until(lambda: Message.objects.get(pk=reply.pk).status == MessageStatus.DONE, timeout=60)
    reply.refresh_from_db()
    after = scrape_when(web, live_streams=0.0)
    labels = {"provider": "openai_compatible"}
    assert sample(after, "parley_replies_total", status="done", **labels) == 1.0
    assert sample(after, "parley_tokens_total", direction="output", **labels) == float(
        reply.usage["output"]
    )
    assert sample(after, "parley_reply_first_token_seconds_count", **labels) == 1.0
    assert sample(after, "parley_reply_seconds_count", **labels) == 1.0
    assert sample(after, "parley_reply_seconds_sum", **labels) == pytest.approx(
        reply.duration_ms / 1000, abs=0.01
    )
    assert sample(after, "parley_takeovers_total", cause="lapsed") is None
    assert "Traceback" not in web.output() + worker.output()


def test_metrics_are_off_without_a_token(client, settings):
    settings.PARLEY_METRICS_TOKEN = ""
    assert client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}").status_code == 404
