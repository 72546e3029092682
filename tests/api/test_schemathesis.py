"""The API against its own OpenAPI schema (issue 33 item 7): schemathesis, as a user runs it
from the command line, with every check, a fixed seed, against the real daphne — once with a
read token and once with a read-and-post token. Every answer must be one the schema
documents, in the error contract; no 500, no schema-valid request refused, no invalid one
accepted. The live stream is left out: it answers 200 and never ends (its bad inputs are in
test_stream_limits)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from apps.api.api import api
from apps.api.tokens import token_create
from apps.chat.council.posting import message_post
from apps.chat.council.replies import thread_interrupt
from apps.chat.models import Thread

pytestmark = pytest.mark.django_db(transaction=True)
SCHEMATHESIS = Path(sys.executable).parent / "schemathesis"
CONFIG = Path(__file__).with_name("schemathesis.toml")  # what the schema cannot say


@pytest.mark.slow
@pytest.mark.parametrize("scope", ["read", "post"])
def test_schemathesis_finds_nothing(
    scope, alice, alice_thread, asgi_server, fast_demo, monkeypatch, tmp_path
):
    (throttle,) = api.throttle
    monkeypatch.setattr(throttle, "num_requests", 1_000_000)  # hundreds of calls a second
    message_post(thread=alice_thread, author=alice, text="@assistant hello")
    raw = token_create(user=alice, name="fuzz", scope=scope)[1]
    run = subprocess.run(
        [str(SCHEMATHESIS), "--config-file", str(CONFIG), "run", f"{asgi_server.url}/api/v1/schema",
         "--checks", "all", "--header", f"Authorization: Bearer {raw}",
         "--max-examples", "25", "--seed", "33", "--exclude-path-regex", "/events$",
         "--request-timeout", "20", "--generation-database", "none", "--no-color"],
        capture_output=True, text=True, timeout=400, cwd=tmp_path,  # its caches go there
    )  # fmt: skip
    for thread in Thread.objects.filter(session__owner=alice):  # what it posted stops here
        thread_interrupt(thread=thread)
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-2000:]
    assert " 0 generated" not in run.stdout and "passed" in run.stdout
