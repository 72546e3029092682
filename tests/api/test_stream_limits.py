"""The live stream against its own users (issue 33): open streams hold no database connection
(50 at once on a deployed process's pool leave its pages and calls answering, during and after),
streams are capped per token and per person, access taken away ends an open stream at once,
and a malformed resume point starts afresh instead of failing."""

from __future__ import annotations

import asyncio
import contextlib
import os
import time

import httpx
import pytest

from apps.api.tokens import token_create, token_revoke
from apps.chat.models import Membership, RoomRole
from apps.chat.records.rooms import member_add, member_remove
from tests.api.test_stream import events
from tests.topology import Topology

pytestmark = pytest.mark.django_db(transaction=True)


def _stream_url(base: str, thread) -> str:
    return f"{base}/api/v1/threads/{thread.public_id}/events"


async def _open_streams(url: str, headers: dict, count: int, opened: asyncio.Event, done):
    """`count` streams held open until `done` is set; each waits for its snapshot."""
    snapshots = 0

    async def one(client: httpx.AsyncClient) -> None:
        nonlocal snapshots
        async with client.stream("GET", url, headers=headers) as response:
            assert response.status_code == 200, await response.aread()
            async for line in response.aiter_lines():
                if line.startswith("event: snapshot"):
                    snapshots += 1
                    if snapshots == count:
                        opened.set()
                    break
            await done.wait()

    limits = httpx.Limits(max_connections=count + 5)
    async with httpx.AsyncClient(timeout=60, limits=limits) as client:
        await asyncio.gather(*(one(client) for _ in range(count)))
    return snapshots


async def timed(client: httpx.AsyncClient, url: str, **kwargs) -> tuple[int, float]:
    """A GET's status and how long it took (ms), printed as the figure, never asserted."""
    started = time.monotonic()
    status = (await client.get(url, **kwargs)).status_code
    return status, (time.monotonic() - started) * 1000


def test_fifty_open_streams_leave_a_deployed_process_answering(alice, alice_thread, tmp_path):
    """A daphne as deployed (its own process, the default pool of 16 on PostgreSQL): 50 streams
    open at once, an API call and a page answer while they are open and once they closed."""
    env_before = os.environ.pop("PARLEY_DB_POOL_SIZE", None)  # the suite's own is larger
    topology = Topology(tmp_path)
    if env_before is not None:
        os.environ["PARLEY_DB_POOL_SIZE"] = env_before
    topology.env.pop("PARLEY_DB_POOL_SIZE", None)
    topology.env.update(PARLEY_API_STREAMS_PER_TOKEN="100", PARLEY_API_STREAMS_PER_USER="100")
    try:
        web = topology.start_web()
        raw = token_create(user=alice, name="many", scope="read")[1]
        headers = {"Authorization": f"Bearer {raw}"}

        async def scenario() -> tuple[int, list[int], list[int]]:
            opened, done = asyncio.Event(), asyncio.Event()
            streams = asyncio.ensure_future(
                _open_streams(_stream_url(web.url, alice_thread), headers, 50, opened, done)
            )
            await asyncio.wait_for(opened.wait(), 60)
            # Well under the pool's 30 s wait: a starved pool fails these.
            async with httpx.AsyncClient(timeout=10) as other:
                during = [
                    await timed(other, f"{web.url}/api/v1/sessions", headers=headers),
                    await timed(other, f"{web.url}/login/"),
                ]
            done.set()
            count = await streams
            async with httpx.AsyncClient(timeout=10) as other:
                after = [
                    await timed(other, f"{web.url}/api/v1/sessions", headers=headers),
                    await timed(other, f"{web.url}/login/"),
                ]
                # The web process's access log keeps an invite link's token out (item 8).
                await other.get(f"{web.url}/join/InviteSecret4242/")
            return count, during, after

        count, during, after = asyncio.run(scenario())
        (api_open, page_open), (api_after, page_after) = (
            [t for _, t in during],
            [t for _, t in after],
        )
        print(f"50 open streams: API call / page in {api_open:.0f} / {page_open:.0f} ms while "
              f"open, {api_after:.0f} / {page_after:.0f} ms after")  # fmt: skip
        during, after = [status for status, _ in during], [status for status, _ in after]
        assert count == 50
        assert during == [200, 200] and after == [200, 200], topology.logs()
        assert "PoolTimeout" not in web.output() and "Traceback" not in web.output()
        assert '"GET /join/[token]/" 302' in web.output()
        assert "InviteSecret4242" not in web.output()
    finally:
        topology.stop()


def test_streams_are_capped_per_token_and_per_person(alice, alice_thread, asgi_server, settings):
    settings.PARLEY_API_STREAMS_PER_TOKEN = 2
    settings.PARLEY_API_STREAMS_PER_USER = 3
    first = token_create(user=alice, name="one", scope="read")[1]
    second = token_create(user=alice, name="two", scope="read")[1]
    url = _stream_url(asgi_server.url, alice_thread)
    readers = []  # a line iterator dropped closes its stream: keep them
    with contextlib.ExitStack() as open_streams, httpx.Client(timeout=20) as client:

        def open_with(raw: str) -> httpx.Response:
            response = open_streams.enter_context(
                client.stream("GET", url, headers={"Authorization": f"Bearer {raw}"})
            )
            if response.status_code == 200:
                readers.append(response.iter_lines())
                next(events(readers[-1], until=lambda k, d: True))
            else:
                response.read()
            return response

        assert [open_with(first).status_code for _ in range(2)] == [200, 200]
        refused = open_with(first)
        assert refused.status_code == 429
        assert refused.json() == {
            "detail": "This token has 2 live streams open already: close one first.",
            "field": None,
        }
        assert open_with(second).status_code == 200  # the person's third
        over = open_with(second)
        assert over.status_code == 429 and "3 live streams" in over.json()["detail"]
    # Closed streams give their places back.
    with client_stream(url, first) as (response, _lines):
        assert response.status_code == 200


@contextlib.contextmanager
def client_stream(url: str, raw: str, **headers):
    with (
        httpx.Client(timeout=20) as client,
        client.stream("GET", url, headers={"Authorization": f"Bearer {raw}", **headers}) as r,
    ):
        yield r, r.iter_lines()


def _ends(lines) -> str:
    """The kind of the first event after the snapshot (an open stream with nothing to say
    sends nothing else)."""
    seen = [kind for kind, _, _ in events(lines, until=lambda k, d: k != "snapshot")]
    return seen[-1]


@pytest.mark.parametrize("how", ["removed", "left", "revoked"])
def test_access_taken_away_ends_an_open_stream(how, alice, bob, alice_session, asgi_server):
    thread = alice_session.active_thread
    member_add(session=alice_session, by=alice, username="bob", role=RoomRole.MEMBER)
    token, raw = token_create(user=bob, name="bob's", scope="read")
    with client_stream(_stream_url(asgi_server.url, thread), raw) as (response, lines):
        assert response.status_code == 200
        kind, _, _ = next(events(lines, until=lambda k, d: True))
        assert kind == "snapshot"
        membership = Membership.objects.get(session=alice_session, user=bob)
        taken_away = time.monotonic()
        if how == "removed":
            member_remove(membership=membership, by=alice)
        elif how == "left":
            member_remove(membership=membership, by=bob)
        else:
            token_revoke(token=token)
        assert _ends(lines) == "end"
        print(f"access {how}: the open stream ended "
              f"{(time.monotonic() - taken_away) * 1000:.0f} ms later")  # fmt: skip
        assert list(lines) == []  # and the server closed it
    # Coming back is refused as well.
    again = httpx.get(
        _stream_url(asgi_server.url, thread), headers={"Authorization": f"Bearer {raw}"}
    )
    assert again.status_code == (401 if how == "revoked" else 404)


@pytest.mark.parametrize(
    "resume",
    [{"params": {"after": "²"}}, {"headers": {"Last-Event-ID": b"\xb2"}},
     {"headers": {"Last-Event-ID": "9" * 40}}, {"params": {"after": "-1"}}],
)  # fmt: skip
def test_a_malformed_resume_point_starts_afresh(resume, alice, alice_thread, asgi_server):
    raw = token_create(user=alice, name="sse", scope="read")[1]
    headers = {"Authorization": f"Bearer {raw}", **resume.get("headers", {})}
    with (
        httpx.Client(timeout=20) as client,
        client.stream(
            "GET", _stream_url(asgi_server.url, alice_thread), headers=headers,
            params=resume.get("params"),
        ) as response,
    ):  # fmt: skip
        assert response.status_code == 200
        kind, _, _ = next(events(response.iter_lines(), until=lambda k, d: True))
    assert kind == "snapshot"
