"""The live path's lean Redis connection, against the suite's real Redis server."""

from __future__ import annotations

import asyncio
import uuid

import pytest
import redis
from django.conf import settings
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError

from apps.chat import livebus, livestate
from apps.chat.wire import Wire


def run(coroutine):
    return asyncio.new_event_loop().run_until_complete(coroutine)


def test_pipelined_calls_answer_in_order_in_the_urls_database_and_errors_stay_in_place():
    key = f"parley:test:{uuid.uuid4().hex}"

    async def calls():
        wire = Wire(settings.REDIS_URL)
        try:
            replies = await wire.calls([("SET", key, "é"), ("GET", key), ("INCR", key),
                                        ("APPEND", key, "!")])  # fmt: skip
            with pytest.raises(ResponseError, match="WRONGTYPE"):
                await wire.call("LPUSH", key, "x")
            return replies, await wire.call("GET", key)
        finally:
            wire.close()

    replies, last = run(calls())
    assert replies[:2] == ["OK", "é"] and isinstance(replies[2], ResponseError)
    assert replies[3] == 3 and last == "é!"
    # The database the URL names (the suite runs each worker in its own), not database 0.
    assert redis.Redis.from_url(settings.REDIS_URL).get(key) == "é!".encode()


def test_a_flushed_script_cache_is_loaded_again_and_the_delta_still_goes_out():
    message_id = str(uuid.uuid4())
    topic = f"test-thread-{uuid.uuid4().hex}"

    async def publish():
        client, wire = livestate.async_client(), Wire(settings.REDIS_URL)
        try:
            await livestate.live_reset(client, message_id)
            await client.script_flush()  # as after Redis restarted
            seqs = await livebus.publish_deltas(wire, [livebus.Delta(topic, message_id, "Hi")])
            snapshot = await livestate.live_snapshot(client, message_id)
            pushes = await livebus.read_on(wire, {topic: 0}, block_ms=100)
            return seqs, snapshot, pushes
        finally:
            wire.close()

    seqs, snapshot, pushes = run(publish())
    assert seqs == [snapshot.seq] and snapshot.text == "Hi"
    [(read_topic, _, event)] = pushes
    assert read_topic == topic and event["text"] == "Hi" and event["message"] == message_id


def test_a_connection_cut_mid_read_fails_the_read_and_the_next_call_reconnects():
    name = f"cut-{uuid.uuid4().hex}"

    async def cut():
        wire = Wire(settings.REDIS_URL)
        try:
            await wire.call("CLIENT", "SETNAME", name)
            reading = asyncio.ensure_future(
                livebus.read_on(wire, {f"idle-{name}": 0}, block_ms=5000)
            )
            await asyncio.sleep(0.1)
            killed = await asyncio.to_thread(_kill_by_name, name)
            with pytest.raises(RedisConnectionError):
                await asyncio.wait_for(reading, 3)
            return killed, await wire.call("PING")
        finally:
            wire.close()

    killed, pong = run(cut())
    assert killed == 1 and pong == "PONG"


def _kill_by_name(name: str) -> int:
    client = redis.Redis.from_url(settings.REDIS_URL, decode_responses=True)
    ids = [c["id"] for c in client.client_list() if c.get("name") == name]
    return sum(client.client_kill_filter(_id=client_id) for client_id in ids)
