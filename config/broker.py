"""The Celery broker transport: kombu's Redis transport, made to survive losing Redis.

When the broker connection drops, the worker closes the old connection (which forgets where
Redis was) and only then closes its channel, whose last act is to put unacknowledged messages
back, so it must know where Redis was. Unpatched, kombu 5.7 raises AttributeError there and
the worker exits with "Unrecoverable error". With the address remembered, putting messages
back fails like any connection error while Redis is down (kombu ignores those while
closing), and the worker reconnects when Redis returns. Replies the broker could not put back
are re-enqueued by the recovery sweep (`apps.chat.council.replies.replies_recover`).

A stopping worker does not wait out its last BRPOP either: see `Channel.close`.
"""

from __future__ import annotations

import contextlib

import redis as redis_py
from kombu.transport import redis


class Channel(redis.Channel):
    def __init__(self, connection, *args, **kwargs):
        self._conninfo = connection.client  # where Redis is, kept past the connection's close
        super().__init__(connection, *args, **kwargs)

    # (id of the BRPOP connection's socket, that connection's id in Redis)
    _poll_client: tuple[int, int] | None = None

    def _brpop_start(self, timeout=None):
        self._note_poll_client()
        super()._brpop_start(timeout)

    def _note_poll_client(self) -> None:
        """The Redis client id of the connection BRPOP blocks on, asked once per socket."""
        connection = self.client.connection
        sock = connection._sock
        if sock is not None and self._poll_client and self._poll_client[0] == id(sock):
            return
        connection.send_command("CLIENT", "ID")
        client_id = int(connection.read_response())
        self._poll_client = (id(connection._sock), client_id)

    def close(self):
        """kombu reads a BRPOP in flight to its end before closing (its reply may carry a
        message), which held every stopping worker up to the block's length: Redis is asked
        to end the block now (CLIENT UNBLOCK: the reply comes at once, empty or with a
        message that arrived first)."""
        if self._in_poll and self._poll_client is not None:
            with (
                contextlib.suppress(redis_py.RedisError, OSError),
                redis_py.Redis(connection_pool=redis_py.ConnectionPool(**self._connparams()))
                as other,
            ):  # fmt: skip
                other.client_unblock(self._poll_client[1])
        super().close()

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
    # How long one BRPOP blocks: an idle worker asks Redis again this often (kombu's default;
    # a stopping worker unblocks its own at once, see `Channel.close`).
    brpop_timeout = 1
