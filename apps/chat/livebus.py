"""Parley's live bus: every push to open tabs, as numbered entries of one Redis stream per topic.

A topic is a thread, a session or a person (`display.events` names them). Publishing appends
an entry numbered by the topic's own counter, so the numbers of a topic are dense: a reader
that sees n + 2 after n knows a push went missing and resyncs instead of showing a wrong
page. Entries stay in Redis for a while (a log, not a broadcast), so a web process that falls
behind reads them late instead of losing them; only a reader that falls further behind than
the stream keeps finds a gap — and resyncs.

A counter that does not exist (a new topic, or Redis restarted empty) starts at the current
time in milliseconds, past any number it handed out before: a reader that held an old number
sees a gap, not a silent rewind.

Deltas of streaming replies are appended to their live tail (`livestate`) and published in
the same script, one round trip for every reply a worker's tick publishes.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass
from typing import Any

import orjson
import redis
import redis.asyncio as aioredis
from redis.exceptions import NoScriptError, ResponseError

from apps.chat.livestate import PREFIX, seq_key, text_key
from apps.chat.wire import Wire

# Entries a topic's stream keeps: seconds of a busy thread, far more than a reader lags by.
STREAM_MAXLEN = 512
STREAM_TTL_SECONDS = 600
COUNTER_TTL_SECONDS = 86400


def stream_key(topic: str) -> str:
    return f"{PREFIX}:bus:{topic}"


def counter_key(topic: str) -> str:
    return f"{PREFIX}:bus:{topic}:n"


# KEYS[1] the topic's stream, KEYS[2] its counter; ARGV[1] now in ms, then the entry's fields.
_PUBLISH = f"""
local function publish(stream, counter, now_ms, fields)
  local n = redis.call('incr', counter)
  if n == 1 then
    n = tonumber(now_ms)
    redis.call('set', counter, n)
  end
  redis.call('expire', counter, {COUNTER_TTL_SECONDS})
  redis.call('xadd', stream, 'MAXLEN', '~', {STREAM_MAXLEN}, n .. '-0', unpack(fields))
  redis.call('expire', stream, {STREAM_TTL_SECONDS})
  return n
end
"""

_PUBLISH_EVENT = _PUBLISH + "return publish(KEYS[1], KEYS[2], ARGV[1], {'e', ARGV[2]})"

# KEYS[3] the reply's live text, KEYS[4] its sequence; ARGV[2] the message id, ARGV[3] the
# chunk. Appends to the tail only while it exists (after Redis restarted empty a bare APPEND
# would start a tail holding only the newest text): -1 then, and nothing is published.
_PUBLISH_DELTA = (
    _PUBLISH
    + """
if redis.call('exists', KEYS[4]) == 0 then return -1 end
redis.call('append', KEYS[3], ARGV[3])
local seq = redis.call('incr', KEYS[4])
publish(KEYS[1], KEYS[2], ARGV[1], {'m', ARGV[2], 's', seq, 't', ARGV[3]})
return seq
"""
)


@dataclass(frozen=True)
class Delta:
    """New text of a streaming reply, for the live tail and the tabs on its thread."""

    topic: str
    message_id: str
    text: str


def _now_ms() -> int:
    return int(time.time() * 1000)


def _encode(event: dict[str, Any]) -> bytes:
    return orjson.dumps(event)


# A script runs by its digest: no source sent per call, and no check per pipeline (redis-py's
# registered scripts ask Redis whether they exist before every pipeline: a round trip more).
_EVENT_SHA = hashlib.sha1(_PUBLISH_EVENT.encode()).hexdigest()  # noqa: S324 (Redis's own id)
_DELTA_SHA = hashlib.sha1(_PUBLISH_DELTA.encode()).hexdigest()  # noqa: S324


def _is_noscript(results: list[Any]) -> bool:
    return any(isinstance(result, NoScriptError) for result in results)


def _event_commands(pipe: Any, pushes: list[tuple[str, dict[str, Any]]]) -> None:
    now = _now_ms()
    for topic, event in pushes:
        pipe.evalsha(_EVENT_SHA, 2, stream_key(topic), counter_key(topic), now, _encode(event))


def publish_sync(client: redis.Redis, pushes: list[tuple[str, dict[str, Any]]]) -> list[int]:
    """Publish (topic, event) pairs in one round trip, from synchronous code; their numbers."""
    if not pushes:
        return []
    for attempt in range(2):
        with client.pipeline(transaction=False) as pipe:
            _event_commands(pipe, pushes)
            results = pipe.execute(raise_on_error=False)
        if not _is_noscript(results) or attempt:
            break
        client.script_load(_PUBLISH_EVENT)  # Redis restarted (or never saw it): load, again
    return [int(n) for n in _raise_errors(results)]


async def publish(client: aioredis.Redis, pushes: list[tuple[str, dict[str, Any]]]) -> list[int]:
    """Publish (topic, event) pairs in one round trip; their numbers."""
    if not pushes:
        return []
    results = await _execute(client, lambda pipe: _event_commands(pipe, pushes), _PUBLISH_EVENT)
    return [int(n) for n in results]


async def publish_deltas(wire: Wire, deltas: list[Delta]) -> list[int]:
    """Append each delta to its reply's live tail and publish it, all in one round trip
    (on the lean connection: this runs once a push).

    Returns each delta's sequence number within its reply, or -1 where the tail is gone
    (Redis restarted empty: the caller seeds it again and publishes the whole text).
    """
    if not deltas:
        return []
    now = _now_ms()
    commands = [
        ("EVALSHA", _DELTA_SHA, 4, stream_key(delta.topic), counter_key(delta.topic),
         text_key(delta.message_id), seq_key(delta.message_id), now, delta.message_id,
         delta.text)
        for delta in deltas
    ]  # fmt: skip
    results = await wire.calls(commands)
    if any(isinstance(result, ResponseError) and "NOSCRIPT" in str(result) for result in results):
        # Redis restarted (or never saw the script), so no command of the batch ran: load it
        # and send the batch again.
        await wire.call("SCRIPT", "LOAD", _PUBLISH_DELTA)
        results = await wire.calls(commands)
    return [int(seq) for seq in _raise_errors(results)]


async def _execute(client: aioredis.Redis, commands, script: str) -> list[Any]:
    for attempt in range(2):
        async with client.pipeline(transaction=False) as pipe:
            commands(pipe)
            results = await pipe.execute(raise_on_error=False)
        if not _is_noscript(results) or attempt:
            break
        await client.script_load(script)  # Redis restarted (or never saw it): load, again
    return _raise_errors(results)


def _raise_errors(results: list[Any]) -> list[Any]:
    for result in results:
        if isinstance(result, Exception):
            raise result
    return results


async def heads(client: aioredis.Redis, topics: list[str]) -> dict[str, int]:
    """The number of each topic's latest push (0: nothing published yet)."""
    if not topics:
        return {}
    values = await client.mget([counter_key(topic) for topic in topics])
    return {topic: int(value or 0) for topic, value in zip(topics, values, strict=True)}


def decode(fields: dict[str, str]) -> dict[str, Any]:
    """An entry's fields (read with `decode_responses`) as the event it carries."""
    if "e" in fields:
        return orjson.loads(fields["e"])
    return {"type": "chat.delta", "message": fields["m"], "seq": int(fields["s"]),
            "text": fields["t"]}  # fmt: skip


def entry_number(entry_id: str) -> int:
    """A stream entry's number in its topic (the entry id is `<n>-0`)."""
    return int(entry_id.partition("-")[0])


async def read_on(
    wire: Wire, after: dict[str, int], *, block_ms: int, wake: str | None = None
) -> list[tuple[str, int, dict[str, Any]]]:
    """`read` on a lean connection of the caller's own (the relay's: it reads once a push,
    and its blocking read holds the connection)."""
    streams = _streams(after, wake)
    if not streams:
        return []
    result = await wire.call("XREAD", "BLOCK", block_ms, "STREAMS", *streams, *streams.values())
    return _pushes(result, wake)


def _streams(after: dict[str, int], wake: str | None) -> dict[str, str]:
    """XREAD's keys and the id each is read after (the wake stream: what comes from now)."""
    streams = {stream_key(topic): f"{n}-0" for topic, n in after.items()}
    if wake is not None:
        streams[wake] = "$"
    return streams


def _pushes(result: Any, wake: str | None) -> list[tuple[str, int, dict[str, Any]]]:
    """XREAD's answer as (topic, number, event); an entry's fields come as a mapping (redis-py)
    or as a flat list of names and values (the lean connection)."""
    prefix = len(stream_key(""))
    pushes: list[tuple[str, int, dict[str, Any]]] = []
    for key, entries in result or ():
        if key == wake:
            continue
        topic = key[prefix:]
        for entry_id, fields in entries:
            if isinstance(fields, list):
                fields = dict(zip(fields[::2], fields[1::2], strict=True))
            pushes.append((topic, entry_number(entry_id), decode(fields)))
    return pushes


async def read(
    client: aioredis.Redis, after: dict[str, int], *, block_ms: int | None, wake: str | None = None
) -> list[tuple[str, int, dict[str, Any]]]:
    """The pushes after each topic's number, in one round trip: (topic, number, event).

    Blocks up to `block_ms` while there is none (None: answers at once); an entry added to
    the `wake` stream ends the wait early (a reader that must start reading another topic).
    """
    streams: dict[Any, Any] = _streams(after, wake)
    if not streams:
        return []
    return _pushes(await client.xread(streams, block=block_ms), wake)


async def wake(client: aioredis.Redis, key: str) -> None:
    """End a reader's blocking wait on `key` (see `read`)."""
    async with client.pipeline(transaction=False) as pipe:
        pipe.xadd(key, {"w": 1}, maxlen=1)
        pipe.expire(key, 60)
        await pipe.execute()
