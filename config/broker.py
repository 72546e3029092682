"""The Celery broker transport: kombu's Redis transport, made to survive losing Redis.

When the broker connection drops, the worker closes the old connection (which forgets where
Redis was) and only then closes its channel, whose last act is to put unacknowledged messages
back, so it must know where Redis was. Unpatched, kombu 5.7 raises AttributeError there and
the worker exits with "Unrecoverable error". With the address remembered, putting messages
back fails like any connection error while Redis is down (kombu ignores those while
closing), and the worker reconnects when Redis returns. Replies the broker could not put back
are re-enqueued by the recovery sweep (`apps.chat.council.replies.replies_recover`).

The BRPOP block is also shorter than kombu's: see `Transport.brpop_timeout`.
"""

from __future__ import annotations

from kombu.transport import redis


class Channel(redis.Channel):
    def __init__(self, connection, *args, **kwargs):
        self._conninfo = connection.client  # where Redis is, kept past the connection's close
        super().__init__(connection, *args, **kwargs)

    def _connparams(self, asynchronous=False):
        transport = self.connection
        if transport.client is not None or self._conninfo is None:
            return super()._connparams(asynchronous=asynchronous)
        transport.client = self._conninfo
        try:
            return super()._connparams(asynchronous=asynchronous)
        finally:
            transport.client = None


class Transport(redis.Transport):
    Channel = Channel
    # A stopping worker reads its last BRPOP's answer before it exits, so the block bounds a
    # deploy's stop (kombu's default is 1 s); an idle worker asks Redis 4 times a second.
    # (kombu's class attribute is an int; BRPOP takes a float.)
    brpop_timeout = 0.25  # type: ignore[assignment]
