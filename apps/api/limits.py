"""The token API's limits, counted in Redis in one atomic step each, so that requests arriving
together cannot overrun them: calls per token per minute (a sliding window), and live streams
open at once per token and per person."""

from __future__ import annotations

import math
import threading
import time
import uuid

from django.conf import settings
from ninja.throttling import SimpleRateThrottle

from apps.chat.livestate import PREFIX, shared_sync_client

# A stream refreshes its place at every keep-alive; one whose process died lapses after this.
STREAM_LEASE_SECONDS = 45

# KEYS[1] a sorted set of recent calls; ARGV: now (ms), window (ms), limit, a unique member.
# Returns 0 when the call is counted, else the ms until the oldest call leaves the window.
_SLIDING_WINDOW = """
local now, window, limit = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
redis.call('zremrangebyscore', KEYS[1], '-inf', now - window)
if redis.call('zcard', KEYS[1]) >= limit then
  local oldest = redis.call('zrange', KEYS[1], 0, 0, 'WITHSCORES')
  return math.max(1, tonumber(oldest[2]) + window - now)
end
redis.call('zadd', KEYS[1], now, ARGV[4])
redis.call('pexpire', KEYS[1], window)
return 0
"""

# KEYS: the sets of open streams (per token, per person); ARGV: now (ms), lease (ms), the
# stream's id, then each set's limit. Adds the stream to every set or to none.
_STREAM_OPEN = """
local now, lease = tonumber(ARGV[1]), tonumber(ARGV[2])
for i, key in ipairs(KEYS) do
  redis.call('zremrangebyscore', key, '-inf', now - lease)
  if redis.call('zcard', key) >= tonumber(ARGV[3 + i]) then return i end
end
for _, key in ipairs(KEYS) do
  redis.call('zadd', key, now, ARGV[3])
  redis.call('pexpire', key, lease)
end
return 0
"""


def _now_ms() -> int:
    return int(time.time() * 1000)


class TokenRateThrottle(SimpleRateThrottle):
    """`PARLEY_API_RATE` calls per token (per address without one) in any sliding window."""

    scope = "token"

    def __init__(self, rate: str) -> None:
        super().__init__(rate)
        self.waits = threading.local()  # one throttle serves every request thread

    def allow_request(self, request) -> bool:
        token = getattr(request, "auth", None)
        ident = (
            f"token:{token.pk}:{token.prefix}"
            if token is not None
            else f"ip:{self.get_ident(request)}"
        )
        if self.num_requests is None or self.duration is None:
            return True  # no rate set
        client = shared_sync_client()
        wait_ms = client.eval(
            _SLIDING_WINDOW, 1, f"{PREFIX}:rate:{ident}",
            _now_ms(), self.duration * 1000, self.num_requests, uuid.uuid4().hex,
        )  # fmt: skip
        self.waits.seconds = int(wait_ms) / 1000
        return int(wait_ms) == 0

    def wait(self) -> float:
        return max(1.0, math.ceil(getattr(self.waits, "seconds", 1.0)))


class TooManyStreams(Exception):
    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


def _stream_keys(*, token_id: int, user_id: int) -> list[str]:
    return [f"{PREFIX}:streams:token:{token_id}", f"{PREFIX}:streams:user:{user_id}"]


async def stream_open(redis, *, token_id: int, user_id: int) -> str:
    """A place for one more open stream, or TooManyStreams naming the limit reached."""
    stream_id = uuid.uuid4().hex
    per_token, per_person = (
        settings.PARLEY_API_STREAMS_PER_TOKEN,
        settings.PARLEY_API_STREAMS_PER_USER,
    )
    full = await redis.eval(
        _STREAM_OPEN, 2, *_stream_keys(token_id=token_id, user_id=user_id),
        _now_ms(), STREAM_LEASE_SECONDS * 1000, stream_id, per_token, per_person,
    )  # fmt: skip
    if full == 1:
        raise TooManyStreams(
            f"This token has {per_token} live streams open already: close one first."
        )
    if full == 2:
        raise TooManyStreams(
            f"You have {per_person} live streams open already (all tokens): close one first."
        )
    return stream_id


async def stream_refresh(redis, stream_id: str, *, token_id: int, user_id: int) -> None:
    async with redis.pipeline(transaction=False) as pipe:
        for key in _stream_keys(token_id=token_id, user_id=user_id):
            pipe.zadd(key, {stream_id: _now_ms()})
            pipe.pexpire(key, STREAM_LEASE_SECONDS * 1000)
        await pipe.execute()


async def stream_close(redis, stream_id: str, *, token_id: int, user_id: int) -> None:
    async with redis.pipeline(transaction=False) as pipe:
        for key in _stream_keys(token_id=token_id, user_id=user_id):
            pipe.zrem(key, stream_id)
        await pipe.execute()
